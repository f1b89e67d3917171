"""Megatron's tools/preprocess_data.py (core_v0.12.0) as the reference for our preprocess_data: its
encode loop without --split-sentences, written by megatron-core's own IndexedDatasetBuilder
(megatron-core 0.12.0 from PyPI) in the dtype Megatron picks, DType.optimal_dtype(vocab_size).

The loop (Encoder.encode): each document's value tokenized whole, a list's items one by one as
sentences; a sentence with no ids is dropped but the document is still added (possibly empty);
--append-eod appends the EOD id to a non-empty document, counted in its last sentence.

megatron.training (the tokenizers) is not on PyPI: megatron_tokenizer() builds a transcription of
Megatron's class for the type, with Megatron's interface (tokenize(text), eod, vocab_size); add a
type by adding a branch there. Everything else reads ids through megatron_ids().
Usage: megatron_preprocess.py --input X.jsonl --output-prefix P --tokenizer-type T
       [--tokenizer-model M] [--append-eod] [--json-keys K...]
   or: megatron_preprocess.py --jobs FILE (one such command line per line, run in one process)
"""

import argparse
import json
import os
import shlex
import sys

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SENTENCEPIECE_TYPES = ("SentencePieceTokenizer", "GPTSentencePieceTokenizer", "Llama2Tokenizer")

_tokenizers = {}


def megatron_tokenizer(tokenizer_type, args):
    """Megatron's tokenizer for --tokenizer-type, built from args as build_tokenizer builds it."""
    key = (tokenizer_type, args.tokenizer_model)
    if key not in _tokenizers:
        if tokenizer_type == "HuggingFaceTokenizer":
            _tokenizers[key] = HuggingFaceTokenizer(args.tokenizer_model)
        elif tokenizer_type in SENTENCEPIECE_TYPES:
            sys.path.insert(0, os.path.join(TESTS, "unit", "tokenizer"))
            import sentencepiece_reference

            cls = sentencepiece_reference.TYPES[tokenizer_type]
            if tokenizer_type == "SentencePieceTokenizer":
                # tools/preprocess_data.py sets args.vocab_extra_ids = 0 whatever the command line says.
                _tokenizers[key] = cls(args.tokenizer_model, vocab_extra_ids=0)
            else:
                _tokenizers[key] = cls(args.tokenizer_model)
        else:
            raise SystemExit(f"megatron_preprocess.py: no reference for --tokenizer-type {tokenizer_type} yet")
    return _tokenizers[key]


class HuggingFaceTokenizer:
    """Megatron's _HuggingFaceTokenizer (core_v0.12.0): AutoTokenizer.from_pretrained(path) with no
    other arguments; tokenize is tokenizer(text).input_ids, eod eos_token_id, vocab_size
    len(tokenizer)."""

    def __init__(self, path):
        from transformers import AutoTokenizer

        self._tokenizer = AutoTokenizer.from_pretrained(path)
        self.eod = self._tokenizer.eos_token_id
        self.vocab_size = len(self._tokenizer)

    def tokenize(self, text):
        return self._tokenizer(text).input_ids


def megatron_ids(tokenizer_type, args, text):
    """Megatron's tokenize(text) for the type."""
    return megatron_tokenizer(tokenizer_type, args).tokenize(text)


def encode(args, json_line):
    """Encoder.encode of tools/preprocess_data.py."""
    data = json.loads(json_line)
    ids = {}
    lens = {}
    for key in args.json_keys:
        text = data[key]
        if isinstance(text, list):
            sentences = text
        else:
            sentences = [text]
        doc_ids = []
        sentence_lens = []
        for sentence in sentences:
            sentence_ids = megatron_ids(args.tokenizer_type, args, sentence)
            if len(sentence_ids) > 0:
                doc_ids.extend(sentence_ids)
                sentence_lens.append(len(sentence_ids))
        if len(doc_ids) > 0 and args.append_eod:
            doc_ids.append(megatron_tokenizer(args.tokenizer_type, args).eod)
            sentence_lens[-1] += 1
        ids[key] = doc_ids
        lens[key] = sentence_lens
    return ids, lens, len(json_line)


def parse(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--input", required=True)
    parser.add_argument("--output-prefix", required=True)
    parser.add_argument("--json-keys", nargs="+", default=["text"])
    parser.add_argument("--tokenizer-type", required=True)
    parser.add_argument("--tokenizer-model")
    parser.add_argument("--append-eod", action="store_true")
    return parser.parse_args(argv)


def preprocess(args):
    from megatron.core.datasets import indexed_dataset

    tokenizer = megatron_tokenizer(args.tokenizer_type, args)
    builders = {}
    for key in args.json_keys:
        builders[key] = indexed_dataset.IndexedDatasetBuilder(
            f"{args.output_prefix}_{key}_document.bin",
            dtype=indexed_dataset.DType.optimal_dtype(tokenizer.vocab_size))
    with open(args.input, "r", encoding="utf-8") as fin:
        for line in fin:
            doc, lens, _ = encode(args, line)
            for key in doc.keys():
                builders[key].add_document(doc[key], lens[key])
    # Megatron finalizes only the last key's builder (its loop variable); with one key, the same.
    for key in args.json_keys:
        builders[key].finalize(f"{args.output_prefix}_{key}_document.idx")


def main():
    # --jobs FILE: one run per line (its flags, as a shell splits them), all in this process:
    # importing megatron-core takes seconds.
    if sys.argv[1:2] == ["--jobs"]:
        with open(sys.argv[2], encoding="utf-8") as jobs:
            for line in jobs:
                if line.strip():
                    preprocess(parse(shlex.split(line)))
    else:
        preprocess(parse(sys.argv[1:]))


if __name__ == "__main__":
    main()
