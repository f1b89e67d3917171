"""Reference point for bench_tokenizer: tiktoken's single-thread encode_ordinary throughput on the
same texts, with GPT-2's BPE built from the same local vocab.json / merges.txt (no download).
Checks tiktoken against the GPT-2 token vectors of tests/data first. Needs `pip install tiktoken`.
Usage: python bench_tiktoken.py [BUILD_DIR]   (a full build: it holds the decompressed test data)"""
import json
import os
import sys
import time

import tiktoken
from tiktoken.load import data_gym_to_mergeable_bpe_ranks
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
data = (sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "build")) + "/tests/data/"
d = os.path.join(root, "tokenizers", "gpt2") + "/"
ranks = data_gym_to_mergeable_bpe_ranks(vocab_bpe_file=d+"gpt2-merges.txt", encoder_json_file=d+"gpt2-vocab.json")
enc = tiktoken.Encoding("gpt2-local", pat_str=r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""", mergeable_ranks=ranks, special_tokens={"<|endoftext|>": 50256})
texts = []
for line in open(data + "corpus.jsonl"):
    t = json.loads(line)["text"]
    texts.extend(t if isinstance(t, list) else [t])
nbytes = sum(len(t.encode()) for t in texts)
# correctness spot check against the reference token vectors
bad = 0
for l in open(data + "gpt2_vectors.jsonl"):
    v = json.loads(l)
    if enc.encode_ordinary(v["text"]) != v["ids"]: bad += 1
print("vector mismatches:", bad)
best = 0
for r in range(3):
    t0 = time.perf_counter(); total = 0
    while total < 40e6:
        for t in texts:
            enc.encode_ordinary(t); total += len(t.encode())
    s = time.perf_counter() - t0
    best = max(best, total/1e6/s)
    print(f"run {r+1}: {total/1e6/s:.2f} MB/s")
print(f"tiktoken {tiktoken.__version__} best: {best:.2f} MB/s on one thread")
