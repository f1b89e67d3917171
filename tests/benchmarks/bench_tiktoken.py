"""Our tokenizer against tiktoken's encode_ordinary, one thread each, same texts, same run.
  default             GPT-2's BPE from the repository's vocab.json / merges.txt (no download),
                      against bench_tokenizer --tokenizer-type GPT2BPETokenizer; tiktoken is
                      first checked against the GPT-2 token vectors of tests/data.
  --vocab V --pattern v1|v2
                      a Megatron TikTokenizer vocabulary (JSON list of rank / base64 bytes) with
                      Megatron's pattern, against --tokenizer-type TikTokenizer (--vocab-size:
                      the vocabulary's size plus the special tokens, so nothing is cut).
tiktoken runs over the texts until 40 MB have gone through, best of 3; bench_tokenizer at least
30 MB, best of 3. Prints both and the ratio.
Usage: python bench_tiktoken.py [BUILD_DIR] [--corpus C.jsonl] [--vocab V.json --pattern v2]"""
import argparse
import base64
import json
import os
import re
import subprocess
import sys
import time

import tiktoken
from tiktoken.load import data_gym_to_mergeable_bpe_ranks

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(root, "tests", "unit", "tokenizer"))
from tiktoken_reference import NUM_SPECIAL, PATTERNS  # noqa: E402  Megatron's patterns, verbatim

parser = argparse.ArgumentParser()
parser.add_argument("build", nargs="?", default=os.path.join(root, "build"))
parser.add_argument("--corpus", help="jsonl with a text key [BUILD/tests/data/corpus.jsonl]")
parser.add_argument("--vocab", help="a Megatron TikTokenizer vocabulary .json")
parser.add_argument("--pattern", choices=["v1", "v2"], default="v2")
args = parser.parse_args()
data = os.path.join(args.build, "tests", "data")
corpus = args.corpus or os.path.join(data, "corpus.jsonl")

if args.vocab:
    entries = json.load(open(args.vocab))
    ranks = {base64.b64decode(e["token_bytes"]): e["rank"] for e in entries}
    enc = tiktoken.Encoding("megatron", pat_str=PATTERNS[args.pattern], mergeable_ranks=ranks, special_tokens={})
    ours_flags = ["--tokenizer-type", "TikTokenizer", "--tokenizer-model", args.vocab, "--tiktoken-pattern",
                  args.pattern, "--vocab-size", str(len(entries) + NUM_SPECIAL)]
    what = f"TikTokenizer {args.pattern}, {len(entries)} tokens"
else:
    d = os.path.join(root, "tokenizers", "gpt2")
    ranks = data_gym_to_mergeable_bpe_ranks(vocab_bpe_file=os.path.join(d, "gpt2-merges.txt"),
                                            encoder_json_file=os.path.join(d, "gpt2-vocab.json"))
    enc = tiktoken.Encoding("gpt2-local", pat_str=r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
                            mergeable_ranks=ranks, special_tokens={"<|endoftext|>": 50256})
    bad = sum(enc.encode_ordinary(v["text"]) != v["ids"]
              for v in map(json.loads, open(os.path.join(data, "gpt2_vectors.jsonl"))))
    assert bad == 0, f"tiktoken disagrees with {bad} GPT-2 reference vectors"
    ours_flags = ["--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", os.path.join(d, "gpt2-vocab.json"),
                  "--merge-file", os.path.join(d, "gpt2-merges.txt")]
    what = "GPT-2 BPE"

texts = []
for line in open(corpus, encoding="utf-8"):
    t = json.loads(line)["text"]
    texts.extend(t if isinstance(t, list) else [t])
best = 0.0
for r in range(3):
    t0 = time.perf_counter()
    total = 0
    while total < 40e6:
        for t in texts:
            enc.encode_ordinary(t)
            total += len(t.encode())
    best = max(best, total / 1e6 / (time.perf_counter() - t0))
print(f"{what} on {corpus}")
print(f"tiktoken {tiktoken.__version__} encode_ordinary, 1 thread: {best:.2f} MB/s")
out = subprocess.run([os.path.join(args.build, "tests", "benchmarks", "bench_tokenizer"), corpus, *ours_flags,
                      "--min-mb", "30"], check=True, capture_output=True, text=True).stdout
ours = float(re.search(r"best: ([0-9.]+) MB/s", out).group(1))
print(f"ours (bench_tokenizer, 1 thread): {ours:.2f} MB/s")
print(f"ratio: {ours / best:.2f}x")
