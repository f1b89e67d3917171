"""Reads a --tensorboard-dir with TensorBoard's own reader and checks it against the training log.

usage: tensorboard_read.py TB_DIR LOG_FILE [--expect-tag TAG ...] [--absent-tag TAG ...]
                           [--flops-per-token F] [--moe-layers LAYERS MOE_LAYERS]

Every scalar the log prints must be in the event files at the same step, as TensorBoard shows it:
'lm loss', 'learning-rate', 'loss-scale' and 'grad-norm' per iteration line (log interval 1), an
MoE model's 'z_loss' and 'load_balancing_loss' (no 'vs samples' twins, as in Megatron),
'batch-size', the 'vs samples' twins at the consumed-samples step, and 'lm loss validation' (and
its ppl) for every validation line. Values are float32 in the file and printed with 7 significant
digits in the log, hence the relative tolerance of 1e-6. With --flops-per-token (the model's
FLOPs per token by Megatron's formula, computed by the caller), 'throughput' at every iteration
must be F x the printed tokens per second / 1e12: the log prints TFLOP/s with one decimal, too
coarse for a small model on CPU ranks. With --moe-layers (--moe-per-layer-logging runs of a model of
LAYERS layers, MOE_LAYERS of them MoE layers): each MoE loss has a 'moe/<name>_layer_<i>' tag for
every layer i at every step its mean tag has, MOE_LAYERS of them not 0 (dense layers log 0), and
their sum over MOE_LAYERS is the mean (Megatron's track_moe_metrics). Exits 1 naming the first
difference.
"""
import argparse
import math
import re
import sys

from tensorboard.backend.event_processing import event_accumulator

ITERATION = re.compile(
    r"iteration\s+(\d+)/\s*\d+ \| consumed samples:\s+(\d+) \|.*?learning rate: (\S+) \| global batch size:\s+(\d+) \|"
    r"(?: lm loss: (\S+) \|)?((?: (?:z_loss|load_balancing_loss): \S+ \|)*) loss scale: (\S+) \|"
    r"(?: grad norm: (\S+) \|)?")
MOE_LOSS = re.compile(r" (z_loss|load_balancing_loss): (\S+) \|")
TOKENS_PER_SECOND = re.compile(r"iteration\s+(\d+)/.*\| tokens per second per GPU: (\S+) \|")
VALIDATION = re.compile(r"validation loss at iteration (\d+)(?: on (?:validation|test) set)? \| lm loss value: (\S+) \| "
                        r"lm loss PPL: (\S+) \|")


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def close(a, b, printed_decimals=None):
    if printed_decimals is not None:  # "grad norm: 1.752", "loss scale: 65536.0"
        return abs(a - b) <= 0.5 * 10.0 ** -printed_decimals + 1e-6 * abs(b)
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-30)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("tb_dir")
    parser.add_argument("log_file")
    parser.add_argument("--expect-tag", action="append", default=[])
    parser.add_argument("--absent-tag", action="append", default=[])
    parser.add_argument("--flops-per-token", type=float)
    parser.add_argument("--moe-layers", type=int, nargs=2)
    args = parser.parse_args()

    acc = event_accumulator.EventAccumulator(args.tb_dir, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    scalars = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in tags}
    print(f"   TensorBoard read {sum(len(v) for v in scalars.values())} scalars under {len(tags)} tags: "
          f"{', '.join(sorted(tags))}", flush=True)

    def expect(tag, step, value, printed_decimals=None):
        points = scalars.get(tag)
        if points is None:
            fail(f"tag '{tag}' is not in {args.tb_dir} (tags: {sorted(tags)})")
        values = [v for s, v in points if s == step]
        if not any(close(v, value, printed_decimals) for v in values):
            fail(f"'{tag}' at step {step}: the log says {value!r}, TensorBoard has {values}")

    checked = 0
    with open(args.log_file, encoding="utf-8") as log:
        for line in log:
            t = TOKENS_PER_SECOND.search(line)
            if t and args.flops_per_token:
                # tokens/s is printed with one decimal (off by up to 0.05), TensorBoard's value is float32
                it, tokens = int(t.group(1)), float(t.group(2))
                want = args.flops_per_token * tokens / 1e12
                slack = args.flops_per_token * 0.05 / 1e12 + 1e-6 * want
                got = [v for s, v in scalars.get("throughput", []) if s == it]
                if not any(abs(v - want) <= slack for v in got):
                    fail(f"'throughput' at step {it}: {args.flops_per_token:.0f} FLOPs per token x {tokens} tokens/s "
                         f"is {want:.6g} TFLOP/s, TensorBoard has {got}")
                checked += 1
            m = ITERATION.search(line)
            if m:
                it, samples, lr, batch, loss, moe, scale, norm = m.groups()
                it, samples = int(it), int(samples)
                for tag, value in MOE_LOSS.findall(moe):
                    expect(tag, it, float(value))
                    checked += 1
                for tag, value, decimals in (("learning-rate", lr, None), ("batch-size", batch, None),
                                             ("lm loss", loss, None), ("loss-scale", scale, 1),
                                             ("grad-norm", norm, 3)):
                    if value is None or tag in args.absent_tag:  # printed, but not written by request
                        continue
                    expect(tag, it, float(value), decimals)
                    expect(tag + " vs samples", samples, float(value), decimals)
                    checked += 2
                continue
            m = VALIDATION.search(line)
            if m:
                it, loss, ppl = int(m.group(1)), float(m.group(2)), float(m.group(3))
                expect("lm loss validation", it, loss)
                if "lm loss validation ppl" in tags:
                    expect("lm loss validation ppl", it, ppl)
                checked += 1
    if checked == 0:
        fail(f"no iteration or validation line in {args.log_file}")
    if args.moe_layers:
        layers, moe_layers = args.moe_layers
        for name in ("z_loss", "load_balancing_loss"):
            for step, mean in scalars.get(name, []):
                per_layer = []
                for i in range(layers):
                    values = [v for s, v in scalars.get(f"moe/{name}_layer_{i}", []) if s == step]
                    if not values:
                        fail(f"no 'moe/{name}_layer_{i}' at step {step}")
                    per_layer.append(values[-1])
                if sum(1 for v in per_layer if v != 0) != moe_layers:
                    fail(f"'{name}' at step {step}: per layer {per_layer}, expected {moe_layers} MoE layers not 0")
                if not close(sum(per_layer) / moe_layers, mean):
                    fail(f"'{name}' at step {step}: the layers' {per_layer} over {moe_layers} is not the mean {mean}")
                checked += 1
    for tag in args.expect_tag:
        if tag not in tags:
            fail(f"expected tag '{tag}' is missing")
    for tag in args.absent_tag:
        if tag in tags:
            fail(f"tag '{tag}' should not be written")
    print(f"   ok: {checked} logged values found in TensorBoard's reading of {args.tb_dir}")


if __name__ == "__main__":
    main()
