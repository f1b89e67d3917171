#!/usr/bin/env bash
# End-to-end preprocess_data throughput: the golden test corpus (tests/data) repeated to at least MIN_MB MB,
# run with 1 and 2 workers (best of REPEATS runs each), plus peak memory (max RSS).
# Also the single-thread tokenizer benchmark. Results: append to docs/benchmarks.md by hand.
# Usage: tests/benchmarks/bench_preprocess.sh [BUILD_DIR]   (a full build: it holds the test data)
# Env: MIN_MB (100), REPEATS (3), WORKERS ("1 2"), TOKENIZER (the tokenizer flags, word-split;
# default GPT-2's: "--tokenizer-type GPT2BPETokenizer --vocab-file V --merge-file M").
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
DATA="$BUILD/tests/data"
VOCAB="$ROOT/tokenizers/gpt2/gpt2-vocab.json"
MERGES="$ROOT/tokenizers/gpt2/gpt2-merges.txt"
MIN_MB="${MIN_MB:-100}"
REPEATS="${REPEATS:-3}"
WORKERS="${WORKERS:-1 2}"
read -ra TOKENIZER_FLAGS <<<"${TOKENIZER:---tokenizer-type GPT2BPETokenizer --vocab-file $VOCAB --merge-file $MERGES}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

corpus="$DATA/corpus.jsonl"
copies=$(( (MIN_MB * 1000000 + $(stat -c %s "$corpus") - 1) / $(stat -c %s "$corpus") ))
for _ in $(seq "$copies"); do cat "$corpus"; done > "$WORK/big.jsonl"
bytes=$(stat -c %s "$WORK/big.jsonl")
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%Y-%m-%d)"
echo "tokenizer: ${TOKENIZER_FLAGS[*]}"
echo "input: $corpus x $copies = $(awk -v b="$bytes" 'BEGIN{printf "%.1f", b/1e6}') MB"

echo "== tokenizer, one thread =="
"$BUILD/tests/benchmarks/bench_tokenizer" "$corpus" \
  --min-mb "$MIN_MB" --repeats "$REPEATS" "${TOKENIZER_FLAGS[@]}" | tail -1

echo "== preprocess_data end to end (--append-eod) =="
declare -A best
for w in $WORKERS; do
  best[$w]=0
  for r in $(seq "$REPEATS"); do
    rm -f "$WORK"/out_*
    start=$(date +%s.%N)
    /usr/bin/time -f "%M" -o "$WORK/rss" "$BUILD/tools/preprocess_data" --input "$WORK/big.jsonl" \
      --output-prefix "$WORK/out" "${TOKENIZER_FLAGS[@]}" --append-eod --workers "$w" --log-interval 1000000 >/dev/null
    end=$(date +%s.%N)
    mbs=$(awk -v b="$bytes" -v s="$start" -v e="$end" 'BEGIN{printf "%.2f", b/1e6/(e-s)}')
    echo "workers $w run $r: $(awk -v s="$start" -v e="$end" 'BEGIN{printf "%.2f", e-s}') s wall, $mbs MB/s, max RSS $(( $(cat "$WORK/rss") / 1024 )) MiB"
    if awk -v a="$mbs" -v b="${best[$w]}" 'BEGIN{exit !(a>b)}'; then best[$w]=$mbs; fi
  done
  echo "workers $w best: ${best[$w]} MB/s"
done
set -- $WORKERS
if [ $# -ge 2 ]; then
  awk -v a="${best[$1]}" -v b="${best[$2]}" -v w1="$1" -v w2="$2" 'BEGIN{printf "speed-up %s -> %s workers: %.2fx\n", w1, w2, b/a}'
fi
