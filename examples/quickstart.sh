#!/usr/bin/env bash
# The built-in example: set up and build, make a jsonl corpus from this repository's own text
# files, turn it into a Megatron dataset with preprocess_data (GPT-2 BPE, --append-eod), train a
# small GPT on it on the CPU with megatron_train (Megatron's flags and log lines), stopping
# half-way with a checkpoint, then resume to the end. Outputs go to examples/output/.
# QUICKSTART_ITERS (default 200) sets the length of the training run.
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

ITERS="${QUICKSTART_ITERS:-200}"
rm -rf "$OUT/checkpoints"
train() {
  "$BUILD_DIR/tools/megatron_train" \
    --num-layers 4 --hidden-size 128 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 \
    --micro-batch-size 8 --global-batch-size 16 --train-iters "$ITERS" \
    --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 10 --weight-decay 0.1 --clip-grad 1.0 \
    --attention-dropout 0.0 --hidden-dropout 0.0 \
    --data-path "$OUT/example_text_document" --split 98,2,0 \
    --tokenizer-type GPT2BPETokenizer --vocab-file "$GPT2_DIR/vocab.json" --merge-file "$GPT2_DIR/merges.txt" \
    --log-interval 10 --eval-interval 50 --eval-iters 2 --log-throughput \
    --save "$OUT/checkpoints" --load "$OUT/checkpoints" --save-interval $((ITERS / 2)) "$@"
}
echo
echo "quickstart: training a 4-layer GPT for $((ITERS / 2)) of $ITERS iterations, then stopping with a checkpoint"
train --exit-interval $((ITERS / 2)) | grep -v '^  [a-z_0-9]* \.\.\.'
echo
echo "quickstart: resuming from $OUT/checkpoints to iteration $ITERS"
train | grep -E 'loaded checkpoint|iteration|validation|saved'
