"""Greedy generation with transformers' own generate() (KV cache on, stopping at EOS) on an HF
folder, for comparison with tools/generate --greedy. Ids at or past VOCAB_LIMIT (Megatron's vocabulary
padding, which tools/generate never draws) are suppressed here too. Prints the new ids on one line.
Usage: hf_generate.py HF_DIR VOCAB_LIMIT MAX_NEW_TOKENS PROMPT_ID [PROMPT_ID ...]"""
import sys

import torch
import transformers


def main() -> int:
    hf_dir, limit, new = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    prompt = torch.tensor([[int(i) for i in sys.argv[4:]]])
    model = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).eval()
    vocab = model.config.vocab_size
    out = model.generate(prompt, max_new_tokens=new, do_sample=False, eos_token_id=model.config.eos_token_id,
                         pad_token_id=model.config.eos_token_id, suppress_tokens=list(range(limit, vocab)) or None)
    print(" ".join(str(int(i)) for i in out[0, prompt.shape[1]:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
