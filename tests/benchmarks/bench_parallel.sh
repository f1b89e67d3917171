#!/usr/bin/env bash
# Iteration time of a small GPT at 1, 2 and 4 ranks (data and tensor parallel) on CPU ranks under
# mpirun, and the optimizer state each rank holds with and without the distributed optimizer
# (measured as the bytes of optimizer state each rank writes into a checkpoint).
# Usage: tests/benchmarks/bench_parallel.sh [BUILD_DIR]   (default: build). Prints Markdown rows.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD=$(realpath "${1:-$ROOT/build}")
TRAIN=$BUILD/tools/megatron_train
DATA=$BUILD/tests/data/corpus_text_document
GPT2=$ROOT/tokenizers/gpt2
WORK=$(mktemp -d /tmp/bench-parallel.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 \
  OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
ITERS=${ITERS:-30}

run() {  # run NP TP EXTRA...: prints the mean elapsed ms per iteration over iterations 11..ITERS
  local np=$1 tp=$2
  shift 2
  mpiexec -n "$np" --oversubscribe --bind-to none "$TRAIN" --num-layers 4 --hidden-size 256 \
    --num-attention-heads 8 --seq-length 128 --max-position-embeddings 128 --micro-batch-size 2 \
    --global-batch-size 8 --lr 1e-3 --train-iters "$ITERS" --log-interval 1 --eval-interval 100000 \
    --eval-iters 0 --data-path "$DATA" --data-cache-path "$WORK/cache" --tokenizer-type GPT2BPETokenizer \
    --vocab-file "$GPT2/gpt2-vocab.json" --merge-file "$GPT2/gpt2-merges.txt" \
    --make-vocab-size-divisible-by $((512 / tp)) --tensor-model-parallel-size "$tp" "$@" >"$WORK/out.txt"
  sed -n 's/.* iteration *\([0-9]*\)\/.*elapsed time per iteration (ms): \([0-9.]*\) .*/\1 \2/p' "$WORK/out.txt" |
    awk '$1 > 10 { s += $2; n++ } END { printf "%.1f", s / n }'
}

echo "| ranks | layout | ms / iteration (iterations 11-$ITERS) |"
echo "|---|---|---|"
echo "| 1 | single process | $(run 1 1) |"
echo "| 2 | DP2 | $(run 2 1) |"
echo "| 2 | TP2 + SP | $(run 2 2 --sequence-parallel) |"
echo "| 4 | DP4 | $(run 4 1) |"
echo "| 4 | DP4, distributed optimizer, overlap | $(run 4 1 --use-distributed-optimizer --overlap-grad-reduce) |"
echo "| 4 | TP2 x DP2 + SP | $(run 4 2 --sequence-parallel) |"
echo
echo "| DP ranks | optimizer | optimizer state bytes per rank (checkpoint) |"
echo "|---|---|---|"
for dp in 1 2 4; do
  for dist in "" --use-distributed-optimizer; do
    rm -rf "$WORK/ckpt"
    ITERS=1 run "$dp" 1 $dist --save "$WORK/ckpt" --save-interval 1 >/dev/null
    if [[ -n $dist ]]; then
      bytes=$(stat -c %s "$WORK/ckpt/iter_0000001/mp_rank_00/distrib_optim.dp_rank_000.safetensors")
      name="distributed"
    else
      bytes=$(stat -c %s "$WORK/ckpt/iter_0000001/mp_rank_00/optimizer.safetensors")
      name="replicated"
    fi
    echo "| $dp | $name | $bytes |"
  done
done
