"""Trains a HuggingFace folder with transformers and plain PyTorch as megatron_train trains it, and
compares the two runs step by step: the loss of every iteration (megatron_train's "lm loss" lines)
and, at the end, every weight (our trained checkpoint exported back to HuggingFace).

The reference is written from Megatron's definitions, not from our code: samples in order, one
global batch per iteration (`samples` from train_samples); the loss the mean cross entropy over
the batch's loss-masked tokens (equal micro-batches: Megatron's mean of micro-batch means); the
gradient clipped to a global 2-norm of `clip` (torch.nn.utils.clip_grad_norm_, Megatron's
clip_coeff = clip / (norm + 1e-6)); torch.optim.AdamW with Megatron's defaults (betas 0.9, 0.999,
eps 1e-8) and no weight decay on biases and 1-D parameters (Megatron's no_wd rule); a constant
learning rate. fp32 on the CPU, no dropout, no auxiliary loss (transformers' output_router_logits
off: its load-balancing loss is one loss over all layers, Megatron's one per layer).

Usage: hf_train_reference.py HF_DIR SAMPLES.safetensors ITERS GLOBAL_BATCH LR WD CLIP LOG:EXPORT_DIR...
Each LOG:EXPORT_DIR is one megatron_train run (its output, and its final checkpoint exported to
HuggingFace), all of the same training in different layouts. Prints each iteration's losses.
Exits 1 when a run's loss differs from the reference's by more than 1e-5 relative in any
iteration, or its weights do not agree: Adam divides each element's momentum by the root of its
second moment, so where a gradient is all but zero, rounding in another summation order can turn
an element's step around (up to twice the learning rate); such elements must stay rare (at most
1e-5 of all), every other element within 1e-5 (1% of one step at the tests' learning rate 1e-3).
"""
import re
import sys
import tempfile

import torch
import transformers
from safetensors.torch import load_file


def our_losses(log_path):
    losses = []
    for line in open(log_path):
        m = re.search(r"iteration\s+(\d+)/.*\| lm loss: ([0-9.E+-]+) \|", line)
        if m:
            losses.append(float(m.group(2)))
    return losses


def main() -> int:
    hf_dir, samples_path = sys.argv[1:3]
    iters, batch = int(sys.argv[3]), int(sys.argv[4])
    lr, wd, clip = float(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7])
    runs = [arg.split(":", 1) for arg in sys.argv[8:]]
    model = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)
    model.config.output_router_logits = False
    model.train()
    decay = [p for n, p in model.named_parameters() if p.dim() > 1 and not n.endswith(".bias")]
    no_decay = [p for n, p in model.named_parameters() if p.dim() <= 1 or n.endswith(".bias")]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=lr, betas=(0.9, 0.999), eps=1e-8)
    data = load_file(samples_path)
    ours = {log: our_losses(log) for log, _ in runs}
    for log, losses in ours.items():
        if len(losses) != iters:
            print(f"FAIL: {log} has {len(losses)} iteration losses, expected {iters}")
            return 1
    ok = True
    for it in range(iters):
        rows = slice(it * batch, (it + 1) * batch)
        tokens, labels, mask = data["tokens"][rows], data["labels"][rows], data["loss_mask"][rows]
        logits = model(input_ids=tokens, use_cache=False).logits
        losses = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="none")
        loss = (losses * mask.flatten()).sum() / mask.sum()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        theirs = loss.item()
        line = f"iteration {it + 1}: reference lm loss {theirs:.6E}"
        for log, losses in ours.items():
            close = abs(theirs - losses[it]) <= 1e-5 * abs(theirs)
            ok = ok and close
            line += f"; {log.rsplit('/', 1)[-1]} {losses[it]:.6E}{'' if close else ' (differs)'}"
        print(line)

    # Both under the hub's names: transformers' save_pretrained writes them so (its in-memory
    # experts are fused).
    with tempfile.TemporaryDirectory() as reference_dir:
        model.save_pretrained(reference_dir)
        reference = load_file(reference_dir + "/model.safetensors")
    total = sum(t.numel() for t in reference.values())
    for log, export_dir in runs:
        trained = load_file(export_dir + "/model.safetensors")
        if sorted(trained) != sorted(reference):
            print(f"FAIL: {export_dir}'s tensors are not the reference's: {sorted(set(trained) ^ set(reference))}")
            return 1
        turned, worst, worst_name = 0, 0.0, ""
        for name, ref in reference.items():
            diff = (trained[name] - ref).abs()
            turned += int((diff > 1e-5).sum())
            if diff.max().item() > worst:
                worst, worst_name = diff.max().item(), name
        agrees = turned <= 1e-5 * total and worst <= 2 * lr * iters
        ok = ok and agrees
        print(f"{export_dir}: weights after {iters} iterations: {turned} of {total} elements differ by more than "
              f"1e-5 (largest difference {worst:.3g}, {worst_name}){'' if agrees else ': too many'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
