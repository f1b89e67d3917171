#!/usr/bin/env bash
# Start-up of megatron_train for a 350M GPT (24 x 1024, 16 heads, seq 2048, untied, vocabulary
# 50304, bf16, mock data) in one process and at TP 2 x PP 2 and TP 4 (4 ranks). Each run is stopped
# at "done with setup": the line after the model, optimizer and data iterators are built, printed
# by every version of megatron_train. For each rank, read from /proc just before the stop:
#   cpu  user + system seconds the rank used since it started (its own work plus any polling of MPI
#        while it waits): on a machine with fewer cores than ranks, the start-up each rank would
#        take with a core to itself;
#   peak its peak RSS (VmHWM), LibTorch's libraries included.
# wall is launch to "done with setup"; setup is the start-up report's model-and-optimizer-setup
# (min, max) when the binary prints one. Every rank and the single process run with THREADS
# intra-op threads (default 1), so the comparison holds threads equal.
# Usage: tests/benchmarks/bench_startup.sh [TRAIN_BINARY]   (default: build/tools/megatron_train)
# Env: THREADS (1), LAYOUTS ("1 2x2 4x1": TPxPP, 1 = one process), REPEATS (1), EXTRA (more flags).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TRAIN=$(realpath "${1:-$ROOT/build/tools/megatron_train}")
THREADS=${THREADS:-1} LAYOUTS=${LAYOUTS:-"1 2x2 4x1"} REPEATS=${REPEATS:-1}
read -r -a EXTRA <<<"${EXTRA:-}"
WORK=$(mktemp -d /tmp/bench_startup.XXXXXX)
trap 'pkill -9 -f -- "$WORK/marker" 2>/dev/null; rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=$THREADS
# The flags end with a --data-cache-path under WORK that nothing reads (mock data): it marks this
# script's processes for pgrep.
flags=(--num-layers 24 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048
  --max-position-embeddings 2048 --untie-embeddings-and-output-weights --bf16 --mock-data
  --tokenizer-type NullTokenizer --vocab-size 50304 --micro-batch-size 1 --global-batch-size 4
  --train-iters 10 --lr 1e-4 --log-interval 1 "${EXTRA[@]}" --data-cache-path "$WORK/marker")

# measure LAYOUT: one run; prints a table row.
measure() {
  local layout=$1 out=$WORK/out.txt job start wall pids=() pid line
  local -a cmd=("$TRAIN" "${flags[@]}")
  if [[ $layout == 1 ]]; then
    start=$(date +%s.%N)
    "${cmd[@]}" >"$out" 2>&1 &
  else
    local tp=${layout%x*} pp=${layout#*x}
    start=$(date +%s.%N)
    "$ROOT/tests/mpirun.sh" -n $((tp * pp)) -x OMP_NUM_THREADS "${cmd[@]}" \
      --tensor-model-parallel-size "$tp" --pipeline-model-parallel-size "$pp" >"$out" 2>&1 &
  fi
  job=$!
  until grep -q "^done with setup" "$out"; do
    kill -0 $job 2>/dev/null || { cat "$out" >&2; echo "bench_startup: layout $layout ended before its setup was done" >&2; exit 1; }
    sleep 0.02
  done
  wall=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {printf "%.2f", e - s}')
  # Every process of this run that is megatron_train itself (not mpirun, not a shell).
  for pid in $(pgrep -f -- "$WORK/marker"); do
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == megatron_train ]] && pids+=("$pid")
  done
  local hz cpus=() rss=()
  hz=$(getconf CLK_TCK)
  for pid in "${pids[@]}"; do
    cpus+=("$(awk -v hz="$hz" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$pid/stat")")
    rss+=("$(awk '/^VmHWM:/ {printf "%.2f", $2 / 1048576}' "/proc/$pid/status")")
  done
  kill -9 $job 2>/dev/null
  pkill -9 -f -- "$WORK/marker" 2>/dev/null || true
  wait $job 2>/dev/null || true
  line=$(sed -n 's/^ *model-and-optimizer-setup[ .]*: (\(.*\), \(.*\))$/\1-\2/p' "$out")
  range() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {print (lo == hi) ? lo : lo "-" hi}'; }
  printf '| %s | %d | %s | %s | %s | %s |\n' "$([[ $layout == 1 ]] && echo "one process" || echo "TP ${layout%x*} x PP ${layout#*x}")" \
    "${#pids[@]}" "$wall" "${line:-(not printed)}" "$(range "${cpus[@]}")" "$(range "${rss[@]}")"
}

echo "machine: $(nproc --all) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; $(date -u +%Y-%m-%d); $TRAIN; $THREADS thread(s) per rank"
echo "| layout | ranks | wall to setup done, s | model-and-optimizer-setup (min-max), ms | cpu per rank, s | peak RSS per rank, GB |"
echo "|---|---|---|---|---|---|"
for layout in $LAYOUTS; do
  for _ in $(seq "$REPEATS"); do measure "$layout"; done
done
