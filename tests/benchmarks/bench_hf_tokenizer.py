"""The HuggingFaceTokenizer against the `tokenizers` library's own encoder, one thread each, same
texts, same tokenizer folder, same run. The library runs `encode_batch` (its Rust core over the
whole corpus, so Python's per-call overhead does not count) with RAYON_NUM_THREADS=1; ours is
build/tests/benchmarks/bench_tokenizer (one Encoder, its cache included, as preprocess_data runs).
Usage: python bench_hf_tokenizer.py TOKENIZER_DIR [BUILD_DIR] [CORPUS.jsonl]
       (the tokenizer folders of tests/unit/tokenizer/hf_reference.py do: BUILD_DIR/tests/unit/hf_reference/*)
"""
import json
import os
import re
import subprocess
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
from tokenizers import Tokenizer  # noqa: E402  (after the thread settings)

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
folder = sys.argv[1]
build = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "build")
corpus = sys.argv[3] if len(sys.argv) > 3 else os.path.join(build, "tests", "data", "corpus.jsonl")
texts = []
for line in open(corpus, encoding="utf-8"):
    t = json.loads(line)["text"]
    texts.extend(t if isinstance(t, list) else [t])
nbytes = sum(len(t.encode()) for t in texts)
lib = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
best = 0.0
for r in range(3):
    start = time.perf_counter()
    lib.encode_batch(texts)
    best = max(best, nbytes / 1e6 / (time.perf_counter() - start))
print(f"tokenizers (Rust, encode_batch, 1 thread): {best:.2f} MB/s on {nbytes / 1e6:.1f} MB")
out = subprocess.run([os.path.join(build, "tests", "benchmarks", "bench_tokenizer"), corpus,
                      "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", folder, "--min-mb", "30"],
                     check=True, capture_output=True, text=True).stdout
ours = float(re.search(r"best: ([0-9.]+) MB/s", out).group(1))
print(f"ours (bench_tokenizer, 1 thread): {ours:.2f} MB/s")
print(f"ratio: {ours / best:.2f}x")
