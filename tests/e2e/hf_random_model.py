"""Writes a randomly initialised transformers model with save_pretrained, for the import tests.
Usage: hf_random_model.py gpt2|llama|mixtral DIR [VOCAB_SIZE] (default 50257, GPT-2's). The norms' weights and biases are perturbed so that
they are not all ones and zeros (a swapped norm would otherwise go unnoticed)."""
import sys

import torch
import transformers


def main() -> int:
    family, out = sys.argv[1], sys.argv[2]
    vocab = int(sys.argv[3]) if len(sys.argv) > 3 else 50257
    torch.manual_seed(1234)
    if family == "gpt2":
        config = transformers.GPT2Config(vocab_size=vocab, n_positions=64, n_embd=64, n_layer=4, n_head=4,
                                         activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0,
                                         attn_pdrop=0.0, initializer_range=0.3)
        model = transformers.GPT2LMHeadModel(config)
    elif family == "mixtral":
        config = transformers.MixtralConfig(vocab_size=vocab, hidden_size=64, intermediate_size=48, num_hidden_layers=2,
                                            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                            num_local_experts=4, num_experts_per_tok=2, rope_theta=20000.0,
                                            tie_word_embeddings=False, initializer_range=0.3)
        model = transformers.MixtralForCausalLM(config)
    else:
        config = transformers.LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                          rope_theta=20000.0, tie_word_embeddings=False,
                                          initializer_range=0.3)
        model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or ".ln_" in name or "bias" in name:
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
