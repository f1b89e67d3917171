#!/usr/bin/env bash
# The 64-rank rehearsal: megatron_train at TP 8 x PP 8 with sequence parallelism and the
# distributed optimizer (64 CPU ranks under mpirun, oversubscribed on this machine's cores)
# against the single process on the same model and data. Prints the largest relative difference
# of the per-iteration losses (fails above 1e-5), the start-up report of each run, and the peak
# RSS per rank (min / median / max, /usr/bin/time around every rank).
# Usage: tests/benchmarks/rehearsal_64.sh [BUILD_DIR]   (default: build)
# Env: ITERS (20), TP (8), PP (8), LAYERS (8), HIDDEN (128), HEADS (8), EXTRA (more flags).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD=$(realpath "${1:-$ROOT/build}")
TRAIN=$BUILD/tools/megatron_train
DATA=$BUILD/tests/data/corpus_text_document
GPT2=$ROOT/tokenizers/gpt2
WORK=$(mktemp -d /tmp/rehearsal.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
ITERS=${ITERS:-20} TP=${TP:-8} PP=${PP:-8} LAYERS=${LAYERS:-8} HIDDEN=${HIDDEN:-128} HEADS=${HEADS:-8}
NP=$((TP * PP))
read -r -a EXTRA <<<"${EXTRA:-}"

flags=(--num-layers "$LAYERS" --hidden-size "$HIDDEN" --num-attention-heads "$HEADS" --seq-length 64
  --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 16 --lr 3e-3 --min-lr 1e-4
  --lr-decay-style cosine --lr-warmup-iters 2 --clip-grad 1.0 --weight-decay 0.1
  --attention-dropout 0 --hidden-dropout 0 --train-iters "$ITERS" --log-interval 1
  --eval-interval 100000 --eval-iters 0 --data-path "$DATA" --data-cache-path "$WORK/cache"
  --tokenizer-type GPT2BPETokenizer --vocab-file "$GPT2/gpt2-vocab.json"
  --merge-file "$GPT2/gpt2-merges.txt" "${EXTRA[@]}")
# Every rank under /usr/bin/time, its peak RSS (KB) in rss.<rank>.
timed() { exec /usr/bin/time -f %M -o "$WORK/rss.${OMPI_COMM_WORLD_RANK:-0}" "$@"; }
export -f timed
export WORK

losses() { sed -n 's/.* iteration *\([0-9]*\)\/.*lm loss: \([0-9.E+-]*\) .*/\1 \2/p' "$1"; }
report() {  # the start-up lines of a log
  grep -E "^\(min, max\) time across ranks|^    (model-and-optimizer-setup|train/valid/test-data-iterators-setup)|Theoretical memory|weight and optimizer|activation memory|total memory" "$1" || true
}
rss() {  # min / median / max of the ranks' peak RSS, MB
  cat "$WORK"/rss.* | sort -n | awk '{v[NR] = $1} END {
    printf "%d ranks: peak RSS min %.0f MB, median %.0f MB, max %.0f MB\n", NR, v[1] / 1024,
      v[int((NR + 1) / 2)] / 1024, v[NR] / 1024}'
  rm -f "$WORK"/rss.*
}

echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(date -u +%Y-%m-%d)"
echo "== one process, $LAYERS x $HIDDEN, $HEADS heads =="
start=$(date +%s.%N)
bash -c 'timed "$@"' _ "$TRAIN" "${flags[@]}" --make-vocab-size-divisible-by 512 >"$WORK/single.txt"
echo "wall $(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {printf "%.1f", e - s}') s"
report "$WORK/single.txt"
rss

echo "== $NP ranks: TP $TP x PP $PP, --sequence-parallel --use-distributed-optimizer =="
start=$(date +%s.%N)
"$ROOT/tests/mpirun.sh" -n "$NP" bash -c 'timed "$@"' _ "$TRAIN" "${flags[@]}" \
  --make-vocab-size-divisible-by $((512 / TP)) --tensor-model-parallel-size "$TP" \
  --pipeline-model-parallel-size "$PP" --sequence-parallel --use-distributed-optimizer \
  >"$WORK/layout.txt"
echo "wall $(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {printf "%.1f", e - s}') s"
report "$WORK/layout.txt"
rss

paste <(losses "$WORK/single.txt") <(losses "$WORK/layout.txt") | awk -v iters="$ITERS" '
  { n++; d = ($2 - $4) / $2; if (d < 0) d = -d; if (d > worst) worst = d; if ($1 != $3) bad = 1 }
  END {
    printf "losses: %d of %d iterations compared, largest relative difference %.3g\n", n, iters, worst
    if (n != iters || bad || worst > 1e-5) { print "FAIL: the layout does not train the single-process model"; exit 1 }
  }'
