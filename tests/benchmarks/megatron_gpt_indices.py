#!/usr/bin/env python3
"""Megatron-LM's own GPT dataset index build, timed: the reference for bench_gpt_indices.sh.

Runs BlendedMegatronDatasetBuilder(GPTDataset, ...) of a Megatron-LM checkout (core_v0.12.0,
with its C++ helpers compiled: `make -C megatron/core/datasets`) the way pretrain_gpt.py calls it,
on one dataset prefix split by --split, and prints one line per phase:

  megatron import_s <seconds>
  megatron build_s <seconds>

The tokenizer only names itself in the cache description (class and files, as Megatron's legacy
GPT-2 BPE tokenizer does); it is never asked to tokenize, so the files need not exist.

Usage: megatron_gpt_indices.py --megatron DIR --data-path PREFIX --cache DIR
         --samples TRAIN VALID TEST [--seq-length 2048] [--seed 1234] [--split 969,30,1]
         [--vocab-file F --merge-file F]
"""
import argparse
import sys
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megatron", required=True, help="Megatron-LM checkout (helpers built)")
    parser.add_argument("--data-path", required=True)
    parser.add_argument("--cache", required=True)
    parser.add_argument("--samples", type=int, nargs=3, required=True)
    parser.add_argument("--seq-length", type=int, default=2048)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--split", default="969,30,1")
    parser.add_argument("--vocab-file", default="gpt2-vocab.json")
    parser.add_argument("--merge-file", default="gpt2-merges.txt")
    args = parser.parse_args()

    start = time.perf_counter()
    sys.path.insert(0, args.megatron)
    from megatron.core.datasets.blended_megatron_dataset_builder import (
        BlendedMegatronDatasetBuilder,
    )
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.megatron_tokenizer import MegatronTokenizer

    class _GPT2BPETokenizer(MegatronTokenizer):
        """Names itself as Megatron's legacy GPT-2 tokenizer does; tokenizes nothing."""

        def __init__(self, vocab_file, merge_file):
            super().__init__(vocab_file, merge_file)

        vocab_size = 50257
        vocab = inv_vocab = {}
        eod = 50256

        def tokenize(self, text):
            raise NotImplementedError

        def detokenize(self, ids):
            raise NotImplementedError

    config = GPTDatasetConfig(
        random_seed=args.seed,
        sequence_length=args.seq_length,
        blend=([args.data_path], None),
        split=args.split,
        path_to_cache=args.cache,
        tokenizer=_GPT2BPETokenizer(args.vocab_file, args.merge_file),
        reset_position_ids=False,
        reset_attention_mask=False,
        eod_mask_loss=False,
        mmap_bin_files=True,
    )
    imported = time.perf_counter()
    datasets = BlendedMegatronDatasetBuilder(
        GPTDataset, args.samples, lambda: True, config).build()
    built = time.perf_counter()
    print(f"megatron import_s {imported - start:.3f}")
    print(f"megatron build_s {built - imported:.3f}")
    print("megatron samples " + " ".join(str(len(d)) if d is not None else "0" for d in datasets))


if __name__ == "__main__":
    main()
