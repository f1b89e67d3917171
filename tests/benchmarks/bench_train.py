"""CPU training throughput of megatron_train against the same GPT in plain PyTorch eager mode,
and megatron_train's start-up time with cached dataset indices.

The model (about 10M parameters with GPT-2's padded vocabulary): 6 layers, hidden 160, 5 heads,
ffn 640, seq 256, micro batch 8, global batch 8, LayerNorm, GeLU (tanh), learned positions, tied
output, dropout 0.1 (--dropout), AdamW, clip 1.0. Both sides use the same threads (torch.get_num_threads()).
The C++ side trains on the golden test dataset (BUILD_DIR/tests/data, from a full build); the PyTorch side on random token ids of the
same shape (the data does not change the arithmetic).
Usage: python bench_train.py BUILD_DIR [--iters 30]
"""
import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

L, H, HEADS, FFN, SEQ, MBS, VOCAB = 6, 160, 5, 640, 256, 8, 50304
DROPOUT = 0.1  # --dropout


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPT2 = os.path.join(ROOT, "tokenizers", "gpt2")


def megatron_args(build, cache, iters):
    return [
        "--num-layers", str(L), "--hidden-size", str(H), "--num-attention-heads", str(HEADS),
        "--ffn-hidden-size", str(FFN), "--seq-length", str(SEQ), "--max-position-embeddings", str(SEQ),
        "--micro-batch-size", str(MBS), "--global-batch-size", str(MBS), "--train-iters", str(iters),
        "--lr", "3e-4", "--min-lr", "3e-5", "--lr-decay-style", "cosine", "--lr-warmup-iters", "2",
        "--data-path", f"{build}/tests/data/corpus_text_document", "--data-cache-path", cache,
        "--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", f"{GPT2}/gpt2-vocab.json",
        "--merge-file", f"{GPT2}/gpt2-merges.txt", "--log-interval", "1", "--eval-iters", "0",
        "--attention-dropout", str(DROPOUT), "--hidden-dropout", str(DROPOUT),
    ]


def run_cpp(build, iters):
    with tempfile.TemporaryDirectory() as cache:
        subprocess.run([f"{build}/tools/megatron_train"] + megatron_args(build, cache, iters) + ["--exit-interval", "1"],
                       check=True, capture_output=True)  # builds the index cache for the same sample counts
        start = time.perf_counter()
        proc = subprocess.Popen([f"{build}/tools/megatron_train"] + megatron_args(build, cache, iters),
                                stdout=subprocess.PIPE, text=True)
        startup = None
        times = []
        for line in proc.stdout:
            if startup is None and line.startswith("training ..."):
                startup = time.perf_counter() - start
            m = re.search(r"elapsed time per iteration \(ms\): ([0-9.]+)", line)
            if m:
                times.append(float(m.group(1)))
        if proc.wait() != 0:
            sys.exit("megatron_train failed")
        return startup, times


class Gpt(torch.nn.Module):
    def __init__(self):
        super().__init__()
        std, scaled = 0.02, 0.02 / math.sqrt(2 * L)
        p = lambda *shape, s=std: torch.nn.Parameter(torch.randn(*shape) * s)
        self.wte, self.wpe = p(VOCAB, H), p(SEQ, H)
        self.layers = torch.nn.ModuleList()
        for _ in range(L):
            layer = torch.nn.Module()
            layer.ln1, layer.ln2 = torch.nn.LayerNorm(H), torch.nn.LayerNorm(H)
            layer.qkv, layer.proj = torch.nn.Linear(H, 3 * H), torch.nn.Linear(H, H)
            layer.fc1, layer.fc2 = torch.nn.Linear(H, FFN), torch.nn.Linear(FFN, H)
            for lin, s in ((layer.qkv, std), (layer.proj, scaled), (layer.fc1, std), (layer.fc2, scaled)):
                torch.nn.init.normal_(lin.weight, std=s)
                torch.nn.init.zeros_(lin.bias)
            self.layers.append(layer)
        self.ln_f = torch.nn.LayerNorm(H)

    def forward(self, tokens, labels):
        b, s = tokens.shape
        x = F.dropout(self.wte[tokens] + self.wpe[:s], DROPOUT, self.training).transpose(0, 1)  # [s, b, h]
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool), 1)
        hn = H // HEADS
        for layer in self.layers:
            qkv = layer.qkv(layer.ln1(x)).view(s, b, HEADS, 3 * hn)
            q, k, v = (t.permute(1, 2, 0, 3) for t in qkv.split(hn, -1))
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(hn)
            probs = F.dropout(torch.softmax(scores.masked_fill(mask, -10000.0), -1), DROPOUT, self.training)
            ctx = (probs @ v).permute(2, 0, 1, 3).reshape(s, b, H)
            x = x + F.dropout(layer.proj(ctx), DROPOUT, self.training)
            x = x + F.dropout(layer.fc2(F.gelu(layer.fc1(layer.ln2(x)), approximate="tanh")), DROPOUT, self.training)
        logits = self.ln_f(x) @ self.wte.T
        return F.cross_entropy(logits.transpose(0, 1).reshape(-1, VOCAB), labels.reshape(-1))


def run_torch(iters):
    torch.manual_seed(0)
    model = Gpt()
    decay = [p for n, p in model.named_parameters() if p.dim() > 1]
    no_decay = [p for n, p in model.named_parameters() if p.dim() <= 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-4)
    tokens = torch.randint(0, 50257, (MBS, SEQ))
    labels = torch.randint(0, 50257, (MBS, SEQ))
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        loss = model(tokens, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()
        times.append(1000 * (time.perf_counter() - t0))
    params = sum(p.numel() for p in model.parameters())
    return params, times


# glibc settings equal to what megatron_train sets with mallopt (see core/allocator.h), so that
# PyTorch can be measured with the same allocator behaviour too.
GLIBC_REUSE = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 62)}


def run_torch_subprocess(iters, extra_env):
    env = dict(os.environ, **extra_env)
    out = subprocess.run([sys.executable, __file__, "--torch-only", "--iters", str(iters), "--dropout", str(DROPOUT), "x"],
                         check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--torch-only", action="store_true")
    ap.add_argument("--dropout", type=float, default=0.1)
    a = ap.parse_args()
    global DROPOUT
    DROPOUT = a.dropout
    if a.torch_only:
        params, times = run_torch(a.iters)
        print(json.dumps({"params": params, "times": times}))
        return
    print(f"threads: {torch.get_num_threads()}, torch {torch.__version__}, dropout {DROPOUT}")
    startup, cpp = run_cpp(a.build, a.iters)
    py = run_torch_subprocess(a.iters, {})
    py_reuse = run_torch_subprocess(a.iters, GLIBC_REUSE)
    skip = 3  # warm-up iterations
    cpp_ms = statistics.median(cpp[skip:])
    py_ms, py_reuse_ms = statistics.median(py["times"][skip:]), statistics.median(py_reuse["times"][skip:])
    tokens = MBS * SEQ
    print(f"model: {py['params'] / 1e6:.2f}M parameters, {tokens} tokens per iteration, "
          f"{a.iters} iterations (median after {skip})")
    print(f"megatron_train:                         {cpp_ms:7.1f} ms/iteration, {tokens / cpp_ms * 1000:6.0f} tokens/s")
    print(f"PyTorch eager:                          {py_ms:7.1f} ms/iteration, {tokens / py_ms * 1000:6.0f} tokens/s")
    print(f"PyTorch eager, same glibc malloc tuning: {py_reuse_ms:6.1f} ms/iteration, "
          f"{tokens / py_reuse_ms * 1000:6.0f} tokens/s")
    print(f"speed ratio (PyTorch time / megatron_train time): {py_ms / cpp_ms:.2f}x default, "
          f"{py_reuse_ms / cpp_ms:.2f}x with the same malloc tuning")
    print(f"megatron_train start-up with cached indices (process start to 'training ...'): {startup:.2f} s")


if __name__ == "__main__":
    main()
