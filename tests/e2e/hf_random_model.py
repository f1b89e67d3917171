"""Writes randomly initialised transformers models with save_pretrained, for the import tests.
Usage: hf_random_model.py [--vocab N] FAMILY DIR [FAMILY DIR ...]
FAMILY: gpt2, llama, mixtral, qwen3 or qwen3_moe; N: the vocabulary (default 50257, GPT-2's).
The norms' weights and biases are perturbed so that they are not all ones and zeros (a swapped
norm would otherwise go unnoticed). For qwen3_moe, DIR-fused/ gets the same model as its
state_dict holds it (transformers' fused experts: mlp.experts.gate_up_proj / down_proj)."""
import os
import shutil
import sys

import torch
import transformers
from safetensors.torch import save_file

SMALL = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
             rope_theta=20000.0, tie_word_embeddings=False, initializer_range=0.3)


def build(family, vocab):
    if family == "gpt2":
        return transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=vocab, n_positions=64, n_embd=64, n_layer=4, n_head=4, activation_function="gelu_new",
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, initializer_range=0.3))
    if family == "mixtral":
        return transformers.MixtralForCausalLM(transformers.MixtralConfig(
            vocab_size=vocab, intermediate_size=48, num_hidden_layers=2, num_local_experts=4, num_experts_per_tok=2,
            **SMALL))
    if family == "qwen3":  # a head size other than hidden / heads, as Qwen3's own configs have
        return transformers.Qwen3ForCausalLM(transformers.Qwen3Config(
            vocab_size=vocab, intermediate_size=96, num_hidden_layers=2, head_dim=24, **SMALL))
    if family == "qwen3_moe":  # layers 0, 1 and 3 with experts; layer 2 dense; no renormalised top-k
        return transformers.Qwen3MoeForCausalLM(transformers.Qwen3MoeConfig(
            vocab_size=vocab, intermediate_size=96, moe_intermediate_size=48, num_hidden_layers=4, head_dim=24,
            num_experts=4, num_experts_per_tok=2, norm_topk_prob=False, mlp_only_layers=[2], **SMALL))
    if family == "llama":
        return transformers.LlamaForCausalLM(transformers.LlamaConfig(
            vocab_size=vocab, intermediate_size=96, num_hidden_layers=4, **SMALL))
    raise SystemExit(f"unknown family {family}")


def main() -> int:
    args = sys.argv[1:]
    vocab = 50257
    if args[:1] == ["--vocab"]:
        vocab, args = int(args[1]), args[2:]
    if not args or len(args) % 2:
        print(__doc__, file=sys.stderr)
        return 2
    for family, out in zip(args[::2], args[1::2]):
        torch.manual_seed(1234)
        model = build(family, vocab)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "norm" in name or ".ln_" in name or "bias" in name:
                    p.add_(torch.randn_like(p) * 0.1)
        model.save_pretrained(out)
        if family == "qwen3_moe":
            fused = out + "-fused"
            os.makedirs(fused)
            shutil.copy(os.path.join(out, "config.json"), fused)
            state = {name: t.contiguous() for name, t in model.state_dict().items()}
            save_file(state, os.path.join(fused, "model.safetensors"), metadata={"format": "pt"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
