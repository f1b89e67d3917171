#!/usr/bin/env bash
# The built-in example: set up and build, make a jsonl corpus from this repository's own text
# files, turn it into a Megatron dataset with preprocess_data (GPT-2 BPE, --append-eod), train a
# small GPT on it on the CPU with megatron_train (Megatron's flags and log lines), stopping
# half-way with a checkpoint, then resume to the end. Outputs go to examples/output/.
# QUICKSTART_ITERS (default 200) sets the length of the training run.
# GPT-2's tokenizer files: tokenizers/gpt2/gpt2-{vocab.json,merges.txt} in this repository, or
# $MEGATRON_GPT2_DIR holding gpt2-vocab.json and gpt2-merges.txt (or vocab.json and merges.txt).
# It builds only the executables; ./scripts/test.sh builds the rest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${MEGATRON_BUILD_DIR:-$ROOT/build}"
GPT2_DIR="${MEGATRON_GPT2_DIR:-$ROOT/tokenizers/gpt2}"
OUT="$ROOT/examples/output"

VOCAB="$GPT2_DIR/gpt2-vocab.json"
MERGES="$GPT2_DIR/gpt2-merges.txt"
[ -f "$VOCAB" ] || [ ! -f "$GPT2_DIR/vocab.json" ] || VOCAB="$GPT2_DIR/vocab.json"
[ -f "$MERGES" ] || [ ! -f "$GPT2_DIR/merges.txt" ] || MERGES="$GPT2_DIR/merges.txt"
if [ ! -f "$VOCAB" ] || [ ! -f "$MERGES" ]; then
  echo "quickstart: GPT-2 tokenizer files not found in $GPT2_DIR (need gpt2-vocab.json and" \
       "gpt2-merges.txt); set MEGATRON_GPT2_DIR to the folder holding them" >&2
  exit 1
fi

"$ROOT/scripts/setup.sh" megatron_tools

mkdir -p "$OUT"
python3 "$ROOT/examples/make_example_corpus.py" "$OUT/corpus.jsonl"
"$BUILD_DIR/tools/preprocess_data" \
  --input "$OUT/corpus.jsonl" \
  --output-prefix "$OUT/example" \
  --json-keys text \
  --tokenizer-type GPT2BPETokenizer \
  --vocab-file "$VOCAB" \
  --merge-file "$MERGES" \
  --append-eod \
  --workers 2 \
  --log-interval 50
echo
"$BUILD_DIR/tools/dataset_info" "$OUT/example_text_document" --document 0 \
  --vocab-file "$VOCAB" --merge-file "$MERGES" --max-ids 32
echo
echo "quickstart: dataset at $OUT/example_text_document.{bin,idx} (use it as --data-path)"

ITERS="${QUICKSTART_ITERS:-200}"
rm -rf "$OUT/checkpoints"
train() {
  "$BUILD_DIR/tools/megatron_train" \
    --num-layers 4 --hidden-size 128 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 \
    --micro-batch-size 4 --global-batch-size 8 --train-iters "$ITERS" \
    --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 10 --weight-decay 0.1 --clip-grad 1.0 \
    --attention-dropout 0.0 --hidden-dropout 0.0 \
    --data-path "$OUT/example_text_document" --split 98,2,0 \
    --tokenizer-type GPT2BPETokenizer --vocab-file "$VOCAB" --merge-file "$MERGES" \
    --log-interval 10 --eval-interval 50 --eval-iters 2 --log-throughput \
    --save "$OUT/checkpoints" --load "$OUT/checkpoints" --save-interval $((ITERS / 2)) "$@"
}
echo
echo "quickstart: training a 4-layer GPT for $((ITERS / 2)) of $ITERS iterations, then stopping with a checkpoint"
train --exit-interval $((ITERS / 2)) | grep --line-buffered -v '^  [a-z_0-9]* \.\.\.'
echo
echo "quickstart: resuming from $OUT/checkpoints to iteration $ITERS"
train | grep --line-buffered -E 'loaded checkpoint|iteration|validation|saved'
