"""The reference for scripts/gpu_check.sh's training numbers: the same GPT in plain PyTorch eager
mode on the same GPU, trained the way a careful PyTorch user would: fp32 parameters under bf16
autocast, scaled_dot_product_attention (flash attention where PyTorch picks it), fused AdamW,
gradient clipping at 1.0, gradient accumulation over the micro-batches of a global batch.

The model is megatron_train's default GPT: pre-LayerNorm, GeLU (erf), learned positions, output
tied to the embedding, biases, no dropout. Tokens are random ids (the data does not change the
arithmetic). Prints one JSON line: ms per iteration (median after the warm-up), tokens/s, peak
memory.
Usage: python bench_train_gpu.py --layers 12 --hidden 768 --heads 12 --seq 1024 --micro-batch 16
       --global-batch 64 [--iters 20] [--vocab 50304]
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F


class Gpt(torch.nn.Module):
    def __init__(self, layers, hidden, heads, seq, vocab):
        super().__init__()
        std, scaled = 0.02, 0.02 / (2 * layers) ** 0.5
        self.heads = heads
        self.wte = torch.nn.Parameter(torch.randn(vocab, hidden) * std)
        self.wpe = torch.nn.Parameter(torch.randn(seq, hidden) * std)
        self.layers = torch.nn.ModuleList()
        for _ in range(layers):
            layer = torch.nn.Module()
            layer.ln1, layer.ln2 = torch.nn.LayerNorm(hidden), torch.nn.LayerNorm(hidden)
            layer.qkv, layer.proj = torch.nn.Linear(hidden, 3 * hidden), torch.nn.Linear(hidden, hidden)
            layer.fc1, layer.fc2 = torch.nn.Linear(hidden, 4 * hidden), torch.nn.Linear(4 * hidden, hidden)
            for lin, s in ((layer.qkv, std), (layer.proj, scaled), (layer.fc1, std), (layer.fc2, scaled)):
                torch.nn.init.normal_(lin.weight, std=s)
                torch.nn.init.zeros_(lin.bias)
            self.layers.append(layer)
        self.ln_f = torch.nn.LayerNorm(hidden)

    def forward(self, tokens, labels):
        b, s = tokens.shape
        x = self.wte[tokens] + self.wpe[:s]  # [b, s, h]
        for layer in self.layers:
            q, k, v = layer.qkv(layer.ln1(x)).view(b, s, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
            ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, -1)
            x = x + layer.proj(ctx)
            x = x + layer.fc2(F.gelu(layer.fc1(layer.ln2(x))))
        logits = self.ln_f(x) @ self.wte.T
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), labels.view(-1))


def main():
    ap = argparse.ArgumentParser()
    for name, default in (("layers", 12), ("hidden", 768), ("heads", 12), ("seq", 1024), ("micro-batch", 16),
                          ("global-batch", 64), ("iters", 20), ("warmup", 5), ("vocab", 50304)):
        ap.add_argument(f"--{name}", type=int, default=default)
    a = ap.parse_args()
    assert torch.cuda.is_available(), "bench_train_gpu.py needs a GPU"
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = Gpt(a.layers, a.hidden, a.heads, a.seq, a.vocab).to(dev)
    decay = [p for p in model.parameters() if p.dim() > 1]
    no_decay = [p for p in model.parameters() if p.dim() <= 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-4, fused=True)
    micro = a.global_batch // a.micro_batch
    tokens = torch.randint(0, 50257, (micro, a.micro_batch, a.seq), device=dev)
    labels = torch.randint(0, 50257, (micro, a.micro_batch, a.seq), device=dev)
    times = []
    torch.cuda.reset_peak_memory_stats()
    for _ in range(a.warmup + a.iters):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for m in range(micro):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(tokens[m], labels[m]) / micro
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(1000 * (time.perf_counter() - t0))
    ms = statistics.median(times[a.warmup:])
    print(json.dumps({
        "parameters": sum(p.numel() for p in model.parameters()),
        "ms_per_iteration": round(ms, 2),
        "tokens_per_s": round(a.global_batch * a.seq / ms * 1000),
        "peak_memory_mb": round(torch.cuda.max_memory_allocated() / 2**20),
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
