#!/usr/bin/env bash
# GPT dataset indices at scale: our build (bench_gpt_indices, the trainer's call) against
# Megatron-LM's own (core_v0.12.0's BlendedMegatronDatasetBuilder + GPTDataset with its compiled
# helpers) on the same synthetic dataset, both pinned to one core, then both again with the
# indices cached. Checks that the two caches hold the same files, byte for byte. Results: append
# to docs/benchmarks.md by hand.
#
# Usage: tests/benchmarks/bench_gpt_indices.sh MEGATRON_DIR [BUILD_DIR]
#   MEGATRON_DIR: a Megatron-LM checkout (git archive core_v0.12.0 of NVIDIA/Megatron-LM) whose
#   helpers are built: pip install pybind11 && make -C MEGATRON_DIR/megatron/core/datasets
# Env: DOCUMENTS (100000000), REPEATS (2), WORK (a temporary folder; the dataset is kept there
#   between runs when WORK is given), PYTHON (.venv/bin/python: torch and numpy), CORE (0),
#   SAMPLES ("24999936 2560000 102400": 24414 iterations of global batch 1024, Megatron's default
#   evaluation of 100 iterations every 1000), SEQ_LENGTH (2048), DROP_CACHES (0; 1 as root: before
#   every run, write back and drop the page cache, then read the .idx back in, so that each run
#   starts from the same memory state; on a VM whose fresh pages are slow to touch this removes
#   most of the run-to-run spread).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
MEGATRON="${1:?usage: bench_gpt_indices.sh MEGATRON_DIR [BUILD_DIR]}"
BUILD="${2:-$ROOT/build}"
DOCUMENTS="${DOCUMENTS:-100000000}"
REPEATS="${REPEATS:-2}"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
CORE="${CORE:-0}"
read -r -a SAMPLES <<<"${SAMPLES:-24999936 2560000 102400}"
SEQ_LENGTH="${SEQ_LENGTH:-2048}"
DROP_CACHES="${DROP_CACHES:-0}"
OURS="$BUILD/tests/benchmarks/bench_gpt_indices"
if [[ -z "${WORK:-}" ]]; then
  WORK="$(mktemp -d)"
  trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK"

[[ -x "$OURS" ]] || { echo "bench_gpt_indices.sh: $OURS is not built" >&2; exit 1; }
compgen -G "$MEGATRON/megatron/core/datasets/helpers_cpp*.so" >/dev/null || {
  echo "bench_gpt_indices.sh: Megatron's helpers are not built in $MEGATRON;" \
    "run: pip install pybind11 && make -C $MEGATRON/megatron/core/datasets" >&2
  exit 1
}

prefix="$WORK/synthetic_${DOCUMENTS}"
[[ -f "$prefix.idx" ]] || "$PYTHON" "$ROOT/tests/benchmarks/synthetic_dataset.py" "$prefix" --documents "$DOCUMENTS"
common=(--data-path "$prefix" --samples "${SAMPLES[@]}" --seq-length "$SEQ_LENGTH")
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%Y-%m-%d), one core (taskset -c $CORE)"
echo "dataset: $DOCUMENTS documents; samples ${SAMPLES[*]}; seq length $SEQ_LENGTH; split 969,30,1; drop caches $DROP_CACHES"

settle() {
  sync
  if [[ $DROP_CACHES == 1 ]]; then
    echo 3 >/proc/sys/vm/drop_caches
    cat "$prefix.idx" >/dev/null
  fi
}

# run NAME CACHE: one timed build; prints "NAME build_s S rss_mb M".
run() {
  local name=$1 cache=$2 line
  if [[ $name == megatron ]]; then
    /usr/bin/time -f "%M" -o "$WORK/rss" taskset -c "$CORE" "$PYTHON" \
      "$ROOT/tests/benchmarks/megatron_gpt_indices.py" --megatron "$MEGATRON" --cache "$cache" \
      "${common[@]}" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err" >&2; exit 1; }
  else
    /usr/bin/time -f "%M" -o "$WORK/rss" taskset -c "$CORE" "$OURS" --cache "$cache" \
      "${common[@]}" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err" >&2; exit 1; }
  fi
  line=$(grep "build_s" "$WORK/out")
  echo "$name ${line#* } rss_mb $(($(tail -1 "$WORK/rss") / 1024))"
}

rm -f "$WORK/cold"
for r in $(seq "$REPEATS"); do
  for side in megatron ours; do
    rm -rf "$WORK/cache_$side"
    settle
    echo "cold $(run "$side" "$WORK/cache_$side")" | tee -a "$WORK/cold"
  done
done
for side in megatron ours; do
  settle
  echo "cached $(run "$side" "$WORK/cache_$side")"
done
# Median and best of the cold builds, and Megatron's over ours for each.
stats() {  # SIDE -> "median best runs"
  awk -v side="$1" '$2 == side {print $4}' "$WORK/cold" | sort -n | awk '{v[NR] = $1} END {
    printf "%.3f %.3f %d\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, v[1], NR}'
}
read -r m_med m_best runs <<<"$(stats megatron)"
read -r o_med o_best _ <<<"$(stats ours)"
echo "cold build_s over $runs runs: megatron median $m_med best $m_best; ours median $o_med best $o_best"
awk -v a="$m_med" -v b="$o_med" -v c="$m_best" -v d="$o_best" \
  'BEGIN {printf "megatron / ours: median %.2fx, best %.2fx\n", a / b, c / d}'
rm -f "$WORK/cold"

(cd "$WORK/cache_megatron" && ls) >"$WORK/files_megatron"
(cd "$WORK/cache_ours" && ls) >"$WORK/files_ours"
if ! cmp -s "$WORK/files_megatron" "$WORK/files_ours"; then
  echo "DIFFERENT: the caches hold different files" >&2
  diff "$WORK/files_megatron" "$WORK/files_ours" >&2
  exit 1
fi
while read -r file; do
  cmp -s "$WORK/cache_megatron/$file" "$WORK/cache_ours/$file" || {
    echo "DIFFERENT: $file" >&2
    exit 1
  }
done <"$WORK/files_ours"
echo "same: all $(wc -l <"$WORK/files_ours") cache files byte for byte"
