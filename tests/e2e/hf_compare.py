"""Loads an HF folder with transformers' own from_pretrained and checks that it gives the logits our
model gave for the same ids (written by model_logits), within 1e-5 in fp32, relative to the largest
|logit| when that is above 1 (fp32 sums of large terms round at that scale). Our
vocabulary may be padded past the HF one (an import at TP > 1): the extra columns are left out.
Usage: hf_compare.py HF_DIR OURS.safetensors EXPECTED_CLASS ID [ID ...]"""
import sys

import torch
import transformers
from safetensors.torch import load_file


def main() -> int:
    hf_dir, ours_path, expected_class = sys.argv[1:4]
    ids = torch.tensor([[int(i) for i in sys.argv[4:]]])
    model = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)
    model.eval()
    if type(model).__name__ != expected_class:
        print(f"FAIL: transformers built {type(model).__name__}, expected {expected_class}")
        return 1
    with torch.no_grad():
        theirs = model(ids).logits
    ours = load_file(ours_path)["logits"]
    if ours.shape[-1] > theirs.shape[-1]:
        ours = ours[..., : theirs.shape[-1]]
    if theirs.shape != ours.shape:
        print(f"FAIL: logits of shape {tuple(theirs.shape)} from transformers, {tuple(ours.shape)} from ours")
        return 1
    worst = (theirs - ours).abs().max().item()
    print(f"{expected_class}: max |logit difference| {worst:.3g} over {ours.numel()} logits "
          f"(largest |logit| {ours.abs().max().item():.3g})")
    return 0 if worst <= 1e-5 * max(1.0, ours.abs().max().item()) else 1


if __name__ == "__main__":
    sys.exit(main())
