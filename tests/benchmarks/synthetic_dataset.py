#!/usr/bin/env python3
"""A synthetic Megatron indexed dataset of any document count, for index-build benchmarks.

Writes PREFIX.idx exactly as preprocess_data writes it (version 1, uint16 tokens, one sequence
per document) with document lengths drawn from a log-normal distribution (numpy's default_rng,
so the same arguments give the same file), and PREFIX.bin as a sparse file of the right size:
building the GPT dataset indices reads only the .idx, so the tokens (all id 0 here) cost no disk.

Usage: synthetic_dataset.py PREFIX --documents N [--mean-log 6.0] [--sigma 1.0] [--seed 0]
"""
import argparse
import os
import struct

import numpy as np

CHUNK = 10_000_000


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prefix")
    parser.add_argument("--documents", type=int, required=True)
    parser.add_argument("--mean-log", type=float, default=6.0,
                        help="mean of log(length); 6.0 with sigma 1.0 averages ~665 tokens")
    parser.add_argument("--sigma", type=float, default=1.0)
    parser.add_argument("--max-length", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.documents < 1:
        parser.error("--documents must be at least 1")

    rng = np.random.default_rng(args.seed)
    n = args.documents
    lengths = np.empty(n, dtype=np.int32)
    for start in range(0, n, CHUNK):
        count = min(CHUNK, n - start)
        drawn = rng.lognormal(args.mean_log, args.sigma, count)
        lengths[start:start + count] = np.clip(np.rint(drawn), 1, args.max_length)

    tmp_idx, tmp_bin = args.prefix + ".idx.tmp", args.prefix + ".bin.tmp"
    with open(tmp_idx, "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(struct.pack("<Q", 1))      # version
        f.write(struct.pack("<B", 8))      # dtype code 8: uint16
        f.write(struct.pack("<Q", n))      # sequences
        f.write(struct.pack("<Q", n + 1))  # document boundaries
        f.write(lengths.tobytes())
        offset = 0
        for start in range(0, n, CHUNK):
            chunk = lengths[start:start + CHUNK].astype(np.int64) * 2  # bytes per uint16 token
            pointers = np.cumsum(chunk) - chunk + offset
            offset = int(pointers[-1] + chunk[-1])
            f.write(pointers.tobytes())
        for start in range(0, n + 1, CHUNK):
            f.write(np.arange(start, min(start + CHUNK, n + 1), dtype=np.int64).tobytes())
    with open(tmp_bin, "wb") as f:
        f.truncate(offset)
    os.replace(tmp_bin, args.prefix + ".bin")
    os.replace(tmp_idx, args.prefix + ".idx")
    print(f"{args.prefix}: {n} documents, {offset // 2} tokens "
          f"(mean {offset / 2 / n:.1f}, max {int(lengths.max())})")


if __name__ == "__main__":
    main()
