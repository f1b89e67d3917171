#!/usr/bin/env bash
# Many ranks on one machine: the quickstart's model and dataset trained by 4 ranks under mpirun,
# tensor-parallel 2 x data-parallel 2 with sequence parallelism, the distributed optimizer and
# overlapped gradient reduction; stopped half-way with a checkpoint (one mp_rank_TT folder per TP
# rank, one optimizer file per DP rank), resumed at 2 ranks (TP 2 x DP 1: the optimizer shards are
# re-split), and the same run on one process for comparison: without dropout every layout prints
# the same lm loss. Run ./examples/quickstart.sh first (it builds and makes the dataset).
# EXAMPLE_ITERS (default 40) sets the length of the run. As root, Open MPI needs the
# OMPI_ALLOW_RUN_AS_ROOT variables, which this script sets; on fewer than 4 cores the ranks share them.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${MEGATRON_BUILD_DIR:-$ROOT/build}"
GPT2_DIR="${MEGATRON_GPT2_DIR:-$ROOT/tokenizers/gpt2}"
OUT="$ROOT/examples/output"
DATA="$OUT/example_text_document"
if [ ! -x "$BUILD_DIR/tools/megatron_train" ] || [ ! -f "$DATA.bin" ]; then
  echo "parallel: run ./examples/quickstart.sh first (it builds megatron_train and makes $DATA)" >&2
  exit 1
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

ITERS="${EXAMPLE_ITERS:-40}"
CKPT="$OUT/checkpoints_tp2_dp2"
rm -rf "$CKPT"
# The padded vocabulary stays 50432 rows at TP 1 and 2 (--make-vocab-size-divisible-by x TP = 256).
flags() {  # flags TP: the run's flags at tensor-parallel size TP
  echo --num-layers 4 --hidden-size 128 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 \
    --micro-batch-size 2 --global-batch-size 8 --train-iters "$ITERS" \
    --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 4 --weight-decay 0.1 --clip-grad 1.0 \
    --attention-dropout 0.0 --hidden-dropout 0.0 --data-path "$DATA" --split 98,2,0 \
    --tokenizer-type GPT2BPETokenizer --vocab-file "$GPT2_DIR/gpt2-vocab.json" \
    --merge-file "$GPT2_DIR/gpt2-merges.txt" --log-interval 5 --eval-interval 1000 --eval-iters 1 \
    --make-vocab-size-divisible-by $((256 / $1)) --tensor-model-parallel-size "$1"
}
show() { grep --line-buffered -E 'using world size|loaded checkpoint|iteration +[0-9]+/|saved checkpoint'; }
PARALLEL=(--sequence-parallel --use-distributed-optimizer --overlap-grad-reduce --ddp-bucket-size 1000000)

echo "parallel: 4 ranks, TP 2 x DP 2, iterations 1-$((ITERS / 2)), then a checkpoint"
# shellcheck disable=SC2046
mpirun -np 4 --bind-to none "$BUILD_DIR/tools/megatron_train" $(flags 2) "${PARALLEL[@]}" \
  --save "$CKPT" --save-interval $((ITERS / 2)) --exit-interval $((ITERS / 2)) | show
echo
echo "parallel: the checkpoint's files"
(cd "$CKPT" && find . -type f | sort)
echo
echo "parallel: 2 ranks, TP 2 x DP 1, resumed from it to iteration $ITERS"
# shellcheck disable=SC2046
mpirun -np 2 --bind-to none "$BUILD_DIR/tools/megatron_train" $(flags 2) "${PARALLEL[@]}" --load "$CKPT" | show
echo
echo "parallel: the same run on one process, for comparison"
# shellcheck disable=SC2046
"$BUILD_DIR/tools/megatron_train" $(flags 1) | show
