#!/usr/bin/env python3
"""Per-iteration communication volume per GPU of tensor (TP), sequence (SP), data (DP) and pipeline
(PP) parallelism and of the distributed optimizer, for the configurations docs/parallelism.md
discusses, with the time it takes at NVLink and InfiniBand rates and its share of the compute time.

A model of the traffic, not a measurement. Assumptions:
- Ring algorithms: an all-reduce of N bytes over g ranks sends 2(g-1)/g N bytes per rank, an
  all-gather or reduce-scatter whose full tensor is N bytes (g-1)/g N, a point-to-point send N.
  Bytes are those each GPU sends; full link rate in one direction, no latency, no overlap.
- Links: NVLink 450 GB/s per direction per GPU (H100, NVLink 4); InfiniBand 400 Gb/s = 50 GB/s
  (one NIC per GPU). With Megatron's rank order tp-cp-ep-dp-pp and 8 GPUs per node, a TP group of
  8 is one node and DP and PP groups cross nodes, so TP is charged at NVLink and DP and PP at
  InfiniBand ("link" column); the table gives both times. For a DP ring spanning nodes this is
  NCCL's bus-bandwidth model (the inter-node link is the bottleneck).
- The busiest rank: for TP and DP the pipeline stage with the most traffic (the first holds the
  word and position embeddings, the last the final norm, the output layer and, with PP, the tied
  copy of the word embedding); for PP a middle stage (one send forward, one backward per
  micro-batch). Layers split evenly over stages. Activations [s, b, h] in the parameter dtype.
- TP per layer and micro-batch: 4 all-reduces of [s, b, h] (forward after the attention
  projection and fc2, backward for the inputs of QKV and fc1). Embedding: a forward all-reduce;
  the output layer: a backward all-reduce of its input; the vocab-parallel cross entropy: all-
  reduces of three fp32 [s, b] tensors (max, target logit, sum of exponentials).
- SP turns each all-reduce into an all-gather plus a reduce-scatter of the same total. With
  learned position embeddings (GPT-3) Megatron all-reduces the word embedding and then scatters
  the sum along s, whose backward is one more all-gather. Megatron's column-parallel layers
  (QKV, fc1, output layer; LinearWithGradAccumulationAndAsyncCommunication, and TE) keep only
  their local input and all-gather it again in backward: one more all-gather each ("Megatron"
  row). This project keeps the gathered input for backward instead ("this project" row).
- DP: one all-reduce of the rank's gradients per iteration, in the gradient dtype (Megatron:
  fp16 with --fp16, fp32 with --bf16, its accumulate_allreduce_grads_in_fp32 default). The
  distributed optimizer: reduce-scatter of the gradients plus all-gather of the parameters (in
  the parameter dtype). This project reduces gradients in fp32 in every precision.
- PP: activations forward and their gradients backward, [s, b, h] per TP rank, [s/tp, b, h] with
  SP (Megatron's p2p shape); with tied embeddings the word-embedding gradient is all-reduced
  between the first and last stage once per iteration.
- Compute time: Megatron's num_floating_point_operations (dense GPT, causal attention counted
  half, as src/train/training_log.cpp) over GPUs x 400 TFLOP/s (about 40% of an H100's 989
  TFLOP/s dense bf16/fp16; Megatron's H100 table reports 408-490). No pipeline bubble, no
  recomputation. The small system-check models reach far less than 400 TFLOP/s, so their shares
  are upper bounds.
- Not counted: the loss and gradient-norm all-reduces (a few bytes), data-loader broadcasts.

Configurations (sources):
- GPT-3 175B: Megatron-LM examples/gpt3/train_gpt3_175b_distributed.sh (96 layers, hidden 12288,
  96 heads, seq 2048, micro-batch 1, global batch 1536 after the ramp-up, --fp16, TP8 PP16, tied
  embeddings, no --sequence-parallel) on 1024 GPUs, so DP 8 (the README's 1024-GPU run).
- GPT-3 6.7B: the shape of GPT-3 6.7B (Brown et al. 2020, Table 2.1: 32 layers, hidden 4096, 32
  heads, seq 2048) at TP8 DP4 as aws-neuron-reference-for-megatron-lm's
  examples/pretrain_gpt3_6.7B_32layers_bf16.sh runs it (32 workers, micro-batch 1, global batch
  64), modelled on GPUs with Megatron's --bf16.
- The system checks: Azure/ai-infrastructure-on-azure examples/megatron-lm/GPT3-175B/slurm
  (README and 04-gpt175B.sh) on 2 nodes of 8 GPUs (DP 16): "375M" = 12 layers, hidden 512, 8
  heads, seq 1024; "857M" = 24 layers, hidden 1024, 16 heads, seq 2048; both TP1 PP1,
  --max-position-embeddings 2048, micro-batch 1, global batch 512, --fp16, with
  --use-distributed-optimizer (--sequence-parallel has no effect at TP1). The labels are the
  guide's (Megatron's examples/gpt3/README.md calls the first shape "345M"); the parameter
  counts are about 64M and 355M.
- Vocabulary: GPT-2 BPE (50257) padded to a multiple of 128 x TP (50304 at TP1, 51200 at TP8).

Usage: python3 tests/benchmarks/comm_volume.py [--markdown]   (standard library only)
"""

import argparse
import dataclasses

NVLINK_BYTES_PER_S = 450e9  # H100 NVLink 4, one direction
IB_BYTES_PER_S = 400e9 / 8  # one 400 Gb/s InfiniBand NIC per GPU
ACHIEVED_FLOPS_PER_GPU = 400e12  # assumed achieved dense bf16/fp16 throughput per H100
GPT2_VOCAB = 50257


def padded_vocab(vocab, tp, divisible_by=128):
    multiple = divisible_by * tp
    return (vocab + multiple - 1) // multiple * multiple


@dataclasses.dataclass
class Config:
    name: str
    layers: int
    hidden: int
    heads: int
    seq: int
    max_positions: int
    tp: int
    pp: int
    dp: int
    micro_batch: int
    global_batch: int
    precision: str  # "fp16" or "bf16"
    learned_positions: bool = True  # GPT-3: learned absolute position embeddings, tied output layer

    @property
    def vocab(self):
        return padded_vocab(GPT2_VOCAB, self.tp)

    @property
    def gpus(self):
        return self.tp * self.pp * self.dp

    @property
    def microbatches(self):
        assert self.global_batch % (self.micro_batch * self.dp) == 0, self.name
        return self.global_batch // (self.micro_batch * self.dp)

    @property
    def param_bytes(self):
        return 2

    @property
    def grad_bytes(self):
        return 2 if self.precision == "fp16" else 4

    @property
    def act_bytes(self):
        return 2

    def parameters(self):
        h, L = self.hidden, self.layers
        layer = 12 * h * h + 13 * h  # QKV, projection, fc1, fc2 weights and biases, two LayerNorms
        return L * layer + self.vocab * h + self.max_positions * h + 2 * h

    def stage_params(self, first, last):
        """Parameters one rank of a pipeline stage holds (TP-sharded ones divided by TP)."""
        h = self.hidden
        sharded = 12 * h * h + 7 * h  # QKV weight and bias, projection weight, fc1 weight and bias, fc2 weight
        replicated = 6 * h  # projection and fc2 biases, two LayerNorms
        n = self.layers // self.pp * (sharded / self.tp + replicated)
        if first:
            n += self.vocab * h / self.tp + self.max_positions * h
        if last:
            n += 2 * h + (self.vocab * h / self.tp if self.pp > 1 else 0)  # final norm; tied output copy
        return n

    def stages(self):
        """(first, last) for the stages that differ: one stage, or the first and the last."""
        return [(True, True)] if self.pp == 1 else [(True, False), (False, True)]

    def flops_per_iteration(self):
        """Megatron's num_floating_point_operations (causal attention, no recompute), as training_log.cpp."""
        b, s, L, h = self.global_batch, self.seq, self.layers, self.hidden
        per_token = L * h * 4 * h * 2 + L * h * 3 * h + L * h * h + h * self.vocab
        return 6.0 * (b * s * per_token + b * s * s * L * h)

    def compute_seconds(self):
        return self.flops_per_iteration() / (self.gpus * ACHIEVED_FLOPS_PER_GPU)


def ring_all_reduce(nbytes, g):
    return 2 * (g - 1) / g * nbytes if g > 1 else 0.0


def ring_gather(nbytes, g):  # all-gather or reduce-scatter of a full tensor of nbytes
    return (g - 1) / g * nbytes if g > 1 else 0.0


def tp_bytes(c, sp, regather):
    """TP bytes per iteration of the busiest stage: sp = sequence parallelism, regather = Megatron's
    re-gathered column-parallel inputs."""
    act = c.seq * c.micro_batch * c.hidden * c.act_bytes
    ar, ag = ring_all_reduce(act, c.tp), ring_gather(act, c.tp)
    layers = c.layers // c.pp
    worst = 0.0
    for first, last in c.stages():
        per_mb = 4 * layers * ar + (2 * layers * ag if regather else 0.0)
        if first:
            per_mb += ar + (ag if sp and c.learned_positions else 0.0)
        if last:
            per_mb += ar + (ag if regather else 0.0)
            per_mb += ring_all_reduce(3 * c.seq * c.micro_batch * 4, c.tp)  # cross entropy
        worst = max(worst, per_mb * c.microbatches)
    return worst


def volumes(c):
    """Bytes each GPU sends per iteration, by kind."""
    out = {}
    if c.tp > 1:
        out["tp"] = tp_bytes(c, sp=False, regather=False)
        out["tp_sp"] = tp_bytes(c, sp=True, regather=False)
        out["tp_sp_megatron"] = tp_bytes(c, sp=True, regather=True)
    if c.pp > 1:
        act = c.seq * c.micro_batch * c.hidden * c.act_bytes
        sends = 2 if c.pp > 2 else 1  # a middle stage sends forward and backward
        out["pp"] = sends * c.microbatches * act
        out["pp_sp"] = out["pp"] / c.tp
        out["pp_embedding"] = ring_all_reduce(c.vocab * c.hidden / c.tp * c.grad_bytes, 2)
    if c.dp > 1:
        params = max(c.stage_params(f, l) for f, l in c.stages())
        out["dp"] = ring_all_reduce(params * c.grad_bytes, c.dp)
        out["dist_opt"] = ring_gather(params * c.grad_bytes, c.dp) + ring_gather(params * c.param_bytes, c.dp)
    return out


CONFIGS = [
    Config("GPT-3 175B", 96, 12288, 96, 2048, 2048, tp=8, pp=16, dp=8, micro_batch=1, global_batch=1536,
           precision="fp16"),
    Config("GPT-3 6.7B", 32, 4096, 32, 2048, 2048, tp=8, pp=1, dp=4, micro_batch=1, global_batch=64,
           precision="bf16"),
    Config("375M system check", 12, 512, 8, 1024, 2048, tp=1, pp=1, dp=16, micro_batch=1, global_batch=512,
           precision="fp16"),
    Config("857M system check", 24, 1024, 16, 2048, 2048, tp=1, pp=1, dp=16, micro_batch=1, global_batch=512,
           precision="fp16"),
]

ROWS = [  # key, what, link
    ("tp", "TP all-reduces (no SP)", "NVLink"),
    ("tp_sp", "TP+SP, this project (gathered inputs kept)", "NVLink"),
    ("tp_sp_megatron", "TP+SP, Megatron (inputs re-gathered in backward)", "NVLink"),
    ("pp", "PP activations + gradients (no SP)", "InfiniBand"),
    ("pp_sp", "PP activations + gradients (SP)", "InfiniBand"),
    ("pp_embedding", "PP tied-embedding gradient all-reduce", "InfiniBand"),
    ("dp", "DP gradient all-reduce", "InfiniBand"),
    ("dist_opt", "distributed optimizer (reduce-scatter + all-gather)", "InfiniBand"),
]


def print_table(header, rows, markdown):
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for r in rows:
            print("| " + " | ".join(r) + " |")
        return
    widths = [max(len(x) for x in col) for col in zip(header, *rows)]
    for r in [header] + rows:
        print("  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    args = parser.parse_args()

    rows = []
    for c in CONFIGS:
        rows.append([c.name, f"{c.layers} / {c.hidden} / {c.heads} / {c.seq}", str(c.vocab),
                     f"{c.parameters() / 1e9:.3g} B", f"{c.gpus} ({c.tp} x {c.pp} x {c.dp})",
                     f"{c.micro_batch} / {c.global_batch}", str(c.microbatches), c.precision,
                     f"{c.compute_seconds():.3g}"])
    print_table(["configuration", "layers / hidden / heads / seq", "padded vocab", "parameters",
                 "GPUs (TP x PP x DP)", "micro / global batch", "micro-batches per DP rank", "precision",
                 "compute s/iteration at 400 TFLOP/s"], rows, args.markdown)
    print()
    rows = []
    for c in CONFIGS:
        compute = c.compute_seconds()
        v = volumes(c)
        for key, what, link in ROWS:
            if key not in v:
                continue
            nbytes = v[key]
            t_nv, t_ib = nbytes / NVLINK_BYTES_PER_S, nbytes / IB_BYTES_PER_S
            share = (t_nv if link == "NVLink" else t_ib) / compute
            rows.append([c.name, what, f"{nbytes / 1e9:,.3f}", f"{t_nv:.4f}", f"{t_ib:.4f}", link,
                         f"{100 * share:.1f}%"])
    print_table(["configuration", "traffic", "GB sent per GPU per iteration", "s at NVLink 450 GB/s",
                 "s at IB 50 GB/s", "link it crosses", "share of compute time"], rows, args.markdown)


if __name__ == "__main__":
    main()
