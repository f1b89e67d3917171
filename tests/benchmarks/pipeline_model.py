#!/usr/bin/env python3
"""Pipeline bubble, activation memory of the first stage and point-to-point volume for GPT-3 175B at
TP8 x PP16 (x DP8 = 1024 GPUs, 128 nodes of 8), global batch 1536 of micro-batches of 1 (Megatron's
examples/gpt3/train_gpt3_175b_distributed.sh and its paper setting), without and with 2 and 3
virtual stages per pipeline rank. A model, not a measurement. Usage:
python3 tests/benchmarks/pipeline_model.py   (standard library only; prints Markdown)

- Bubble: (P - 1) / (V * M) of the ideal compute time (Narayanan et al. 2021), M micro-batches per
  DP rank per iteration.
- Activations held by the first stage (the most): the micro-batch steps in flight at the end of
  its warm-up, min(P, M) for 1F1B and min((P - 1) * 2 + (V - 1) * P + 1, M * V) chunk steps for
  the interleaved schedule (Megatron's warm-up counts, spec 9), each of L / (P * V) layers. Bytes per
  layer and micro-batch from Korthikanti et al. 2022 (fp16 activations, dropout masks, no
  recomputation): s*b*h*(10 + 24/t + 5*a*s/(h*t)) with tensor parallelism t, s*b*h*(34 +
  5*a*s/h)/t with sequence parallelism too.
- Point to point: each micro-batch crosses V stage boundaries per stage forward and again
  backward; one [s, b, h] fp16 tensor per TP rank (s/t with sequence parallelism), over one
  400 Gb/s InfiniBand NIC per GPU (50 GB/s), without overlap.
"""

L, H, A, S, VOCAB = 96, 12288, 96, 2048, 51200
TP, PP, DP, MBS, GBS = 8, 16, 8, 1, 1536
M = GBS // (MBS * DP)
IB = 50e9


def layer_bytes(sp):
    if sp:
        return S * MBS * H * (34 + 5 * A * S / H) / TP
    return S * MBS * H * (10 + 24 / TP + 5 * A * S / (H * TP))


def in_flight_layers(v):
    if v == 1:
        steps = min(PP, M)
    else:
        steps = min((PP - 1) * 2 + (v - 1) * PP + 1, M * v)
    return steps, steps * L / (PP * v)


def main():
    print(f"GPT-3 175B: {L} layers, hidden {H}, {A} heads, sequence {S}; TP{TP} x PP{PP} x DP{DP} "
          f"({TP * PP * DP} GPUs), global batch {GBS}, micro-batch {MBS}: M = {M} micro-batches per DP rank.\n")
    print("| virtual stages V | layers per chunk | bubble (P-1)/(V*M) | first stage: chunk steps in flight "
          "| layer-micro-batches held | activations, TP only (GB) | activations, TP+SP (GB) "
          "| p2p sent per GPU per iteration, TP only (GB) | at 50 GB/s (s) | with SP (GB) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for v in (1, 2, 3):  # 6 layers per stage: V must divide 6 (4 cannot)
        steps, layers = in_flight_layers(v)
        p2p = 2 * M * v * S * MBS * H * 2  # forward activations and backward gradients, fp16
        print(f"| {v} | {L // (PP * v)} | {100 * (PP - 1) / (v * M):.2f}% | {steps} | {layers:g} | "
              f"{layers * layer_bytes(False) / 1e9:.1f} | {layers * layer_bytes(True) / 1e9:.1f} | "
              f"{p2p / 1e9:.1f} | {p2p / IB:.2f} | {p2p / TP / 1e9:.2f} |")


if __name__ == "__main__":
    main()
