"""Checks our models against transformers' own, loading each HF folder once with from_pretrained
(CPU, fp32). One process runs many checks: starting Python with transformers takes seconds.

Usage: hf_check.py JOBS_FILE (one job per line, words separated by spaces; '-' reads standard input)
   or: hf_check.py JOB_WORDS... (one job)
Jobs:
  logits HF_DIR OURS.safetensors CLASS ID...
      transformers builds CLASS from HF_DIR and gives, for the ids, the logits our model gave (written
      by model_logits) within 1e-5, relative to the largest |logit| when that is above 1 (fp32 sums
      of large terms round at that scale). Our vocabulary may be padded past HF's (an import at
      TP > 1): the extra columns are left out.
  generate HF_DIR VOCAB_LIMIT MAX_NEW_TOKENS OURS PROMPT_ID...
      transformers' greedy generate() (KV cache on, stopping at EOS) gives OURS, our generated ids
      joined by commas. Ids at or past VOCAB_LIMIT (Megatron's
      vocabulary padding, which tools/generate never draws) are suppressed here too.
  tensors_equal DIR_A DIR_B
      the two folders' model.safetensors hold the same names, shapes and values.
Prints one line per job ("ok: ..." or "FAIL: ..."); exits 1 when any job failed."""
import os
import sys

import torch
import transformers
from safetensors.torch import load_file

_models = {}


def model_of(hf_dir):
    if hf_dir not in _models:
        _models[hf_dir] = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).eval()
    return _models[hf_dir]


def logits(hf_dir, ours_path, expected_class, *ids):
    model = model_of(hf_dir)
    if type(model).__name__ != expected_class:
        return f"transformers built {type(model).__name__}, expected {expected_class}"
    with torch.no_grad():
        theirs = model(torch.tensor([[int(i) for i in ids]])).logits
    ours = load_file(ours_path)["logits"]
    if ours.shape[-1] > theirs.shape[-1]:
        ours = ours[..., : theirs.shape[-1]]
    if theirs.shape != ours.shape:
        return f"logits of shape {tuple(theirs.shape)} from transformers, {tuple(ours.shape)} from ours"
    worst = (theirs - ours).abs().max().item()
    text = (f"{expected_class}: max |logit difference| {worst:.3g} over {ours.numel()} logits "
            f"(largest |logit| {ours.abs().max().item():.3g})")
    return None if worst <= 1e-5 * max(1.0, ours.abs().max().item()) else text, text


def generate(hf_dir, limit, new, ours, *prompt):
    model = model_of(hf_dir)
    want = [int(i) for i in ours.split(",") if i]
    if not want:
        return "no generated ids of ours to compare"
    vocab = model.config.vocab_size
    eos = model.config.eos_token_id
    out = model.generate(torch.tensor([[int(i) for i in prompt]]), max_new_tokens=int(new), do_sample=False,
                         eos_token_id=eos, pad_token_id=eos, suppress_tokens=list(range(int(limit), vocab)) or None)
    theirs = [int(i) for i in out[0, len(prompt):]]
    text = f"{len(theirs)} greedy tokens equal"
    return None if theirs == want else f"ours {want}, transformers' {theirs}", text


def tensors_equal(dir_a, dir_b):
    a, b = load_file(dir_a + "/model.safetensors"), load_file(dir_b + "/model.safetensors")
    if sorted(a) != sorted(b):
        return f"names differ: {sorted(set(a) ^ set(b))}"
    for name in a:
        if a[name].shape != b[name].shape or not torch.equal(a[name], b[name]):
            return f"{name} differs"
    return None, f"{len(a)} tensors equal"


JOBS = {"logits": logits, "generate": generate, "tensors_equal": tensors_equal}


def run(words):
    try:
        result = JOBS[words[0]](*words[1:])
    except Exception as e:  # a job that cannot run is a failed check, reported with the others
        result = f"{type(e).__name__}: {e}"
    failure, text = result if isinstance(result, tuple) else (result, "")
    label = " ".join([words[0]] + [os.path.basename(w) for w in words[1:2]])
    print(f"FAIL: {label}: {failure}" if failure else f"ok: {label}: {text}", flush=True)
    return failure is None


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] in JOBS:
        jobs = [sys.argv[1:]]
    elif len(sys.argv) == 2:
        lines = (sys.stdin if sys.argv[1] == "-" else open(sys.argv[1])).read().splitlines()
        jobs = [line.split() for line in lines if line.strip()]
    else:
        print(__doc__, file=sys.stderr)
        return 2
    results = [run(words) for words in jobs]  # every job runs, failed or not
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
