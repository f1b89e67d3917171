"""What transformers makes of a config.json that leaves a key out, for each family the import reads:
the reference for the import's defaults (test_hf_config_reference.cpp).

For each family a config.json giving every key the import reads a value that is not the default,
then one variant per optional key without it; each is read by transformers' own AutoConfig and
the values it resolves are written beside the config. Sizes the tensors need (hidden, heads,
layers, MLP) stay given: the import requires them.
Usage: hf_config_reference.py --out DIR   (writes DIR/cases.json, then DIR/done)
"""

import argparse
import json
import os
import tempfile

from transformers import AutoConfig

SIZES = {"vocab_size": 1000, "hidden_size": 128, "num_attention_heads": 32, "num_hidden_layers": 2, "intermediate_size": 96}
LLAMA_STYLE = {"num_key_value_heads": 2, "head_dim": 8, "max_position_embeddings": 64, "rope_theta": 5000.0,
               "rms_norm_eps": 3e-5, "tie_word_embeddings": True}
EXPERTS = {"num_experts_per_tok": 3, "router_aux_loss_coef": 0.02}
FAMILIES = {
    "llama": ("LlamaForCausalLM", dict(SIZES, **LLAMA_STYLE)),
    "mixtral": ("MixtralForCausalLM", dict(SIZES, **LLAMA_STYLE, **EXPERTS, num_local_experts=16)),
    "qwen3": ("Qwen3ForCausalLM", dict(SIZES, **LLAMA_STYLE)),
    "qwen3_moe": ("Qwen3MoeForCausalLM", dict(SIZES, **LLAMA_STYLE, **EXPERTS, num_experts=16, moe_intermediate_size=48,
                                             norm_topk_prob=True)),
    "gpt2": ("GPT2LMHeadModel", {"vocab_size": 1000, "n_embd": 64, "n_head": 4, "n_layer": 2, "n_positions": 64,
                                 "n_inner": 96, "layer_norm_epsilon": 3e-5, "resid_pdrop": 0.0, "attn_pdrop": 0.0,
                                 "tie_word_embeddings": False, "bos_token_id": 0, "eos_token_id": 0}),
}
REQUIRED = set(SIZES) | {"n_embd", "n_head", "n_layer", "bos_token_id", "eos_token_id"}


def resolved(c):
    """The values the import's model depends on, as transformers resolves them."""
    if c.model_type == "gpt2":
        return {"max_position_embeddings": c.n_positions, "norm_epsilon": c.layer_norm_epsilon,
                "ffn_hidden_size": c.n_inner if c.n_inner is not None else 4 * c.n_embd,
                "hidden_dropout": c.resid_pdrop, "attention_dropout": c.attn_pdrop,
                "tie_word_embeddings": c.tie_word_embeddings}
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    out = {"num_query_groups": c.num_key_value_heads, "kv_channels": head_dim,
           "max_position_embeddings": c.max_position_embeddings, "rotary_base": c.rope_parameters["rope_theta"],
           "norm_epsilon": c.rms_norm_eps, "tie_word_embeddings": c.tie_word_embeddings}
    if c.model_type in ("mixtral", "qwen3_moe"):
        out.update(num_experts=c.num_local_experts, router_topk=c.num_experts_per_tok,
                   aux_loss_coeff=c.router_aux_loss_coef)
    if c.model_type == "qwen3_moe":
        out.update(moe_ffn_hidden_size=c.moe_intermediate_size, router_pre_softmax=not c.norm_topk_prob)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    out_dir = parser.parse_args().out
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        for model_type, (architecture, keys) in FAMILIES.items():
            full = dict(keys, model_type=model_type, architectures=[architecture])
            for left_out in [None] + [k for k in keys if k not in REQUIRED]:
                config = {k: v for k, v in full.items() if k != left_out}
                with open(os.path.join(tmp, "config.json"), "w") as f:
                    json.dump(config, f)
                cases.append({"left_out": left_out or "", "config": config,
                              "expected": resolved(AutoConfig.from_pretrained(tmp))})
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)
    open(os.path.join(out_dir, "done"), "w").close()
    print(f"{len(cases)} configs read by transformers into {out_dir}/cases.json")


if __name__ == "__main__":
    main()
