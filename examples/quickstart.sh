#!/usr/bin/env bash
# The built-in example: set up and build, make a jsonl corpus from this repository's own text
# files, turn it into a Megatron dataset with preprocess_data (GPT-2 BPE, --append-eod), and
# print what was written. Outputs go to examples/output/.
# GPT-2's vocab.json and merges.txt: $MEGATRON_GPT2_DIR, default ../shared/data/gpt2 beside the
# repository (any copy of the standard gpt2-vocab.json / gpt2-merges.txt works).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${MEGATRON_BUILD_DIR:-$ROOT/build}"
GPT2_DIR="${MEGATRON_GPT2_DIR:-$ROOT/../shared/data/gpt2}"
OUT="$ROOT/examples/output"

"$ROOT/scripts/setup.sh"

if [ ! -f "$GPT2_DIR/vocab.json" ] || [ ! -f "$GPT2_DIR/merges.txt" ]; then
  echo "quickstart: GPT-2 tokenizer files not found in $GPT2_DIR (need vocab.json and merges.txt);" \
       "set MEGATRON_GPT2_DIR to the folder holding them" >&2
  exit 1
fi

mkdir -p "$OUT"
python3 "$ROOT/examples/make_example_corpus.py" "$OUT/corpus.jsonl"
"$BUILD_DIR/tools/preprocess_data" \
  --input "$OUT/corpus.jsonl" \
  --output-prefix "$OUT/example" \
  --json-keys text \
  --tokenizer-type GPT2BPETokenizer \
  --vocab-file "$GPT2_DIR/vocab.json" \
  --merge-file "$GPT2_DIR/merges.txt" \
  --append-eod \
  --workers 2 \
  --log-interval 50
echo
"$BUILD_DIR/tools/dataset_info" "$OUT/example_text_document" --document 0 \
  --vocab-file "$GPT2_DIR/vocab.json" --merge-file "$GPT2_DIR/merges.txt" --max-ids 32
echo
echo "quickstart: dataset at $OUT/example_text_document.{bin,idx} (use it as --data-path)"
