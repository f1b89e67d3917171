#!/usr/bin/env bash
# preprocess_data against Megatron's own output: the golden corpus gives byte-identical .bin/.idx
# for any worker count, from .gz / .zst copies and from the corpus split into several files, and
# the console lines have Megatron's format (spec 2.3). Rates and timings are checked by form only.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require gzip zstd

DOCS=$(wc -l <"$CORPUS")
PROGRESS_RE='^Processed [0-9]+ documents \([0-9.e+-]+ docs/s, [0-9.e+-]+ MB/s\)\.$'

# check_progress ERR_FILE INTERVAL: every stderr line is a progress line, at INTERVAL, 2*INTERVAL...
check_progress() {
  local bad
  bad=$(grep -cvE "$PROGRESS_RE" "$1" || true)
  [[ $bad -eq 0 ]] || { show "$1" stderr; fail "$bad stderr lines are not progress lines"; }
  local expected actual
  expected=$(seq "$2" "$2" "$DOCS" | paste -sd' ')
  actual=$(sed -E 's/^Processed ([0-9]+) documents.*/\1/' "$1" | paste -sd' ')
  assert_eq "$expected" "$actual" "progress counts with --log-interval $2"
}

# check_startup OUT_FILE WORKERS INPUT...: Megatron's stdout lines, one Opening per input in order.
check_startup() {
  local out=$1 workers=$2
  shift 2
  assert_eq "$*" "$(sed -n 's/^Opening //p' "$out" | paste -sd' ')" "Opening lines"
  grep -qE '^Time to startup: [0-9.e+-]+$' "$out" || { show "$out" stdout; fail "no 'Time to startup: <float>' line"; }
  assert_line "$out" "Processing data with $workers workers."
  ok "stdout has Time to startup and 'Processing data with $workers workers.'"
}

step "--workers 1: identical to Megatron's corpus_text_document"
assert_succeeds "$PREPROCESS" "${TOKENIZER[@]}" --append-eod --workers 1 --input "$CORPUS" --output-prefix w1
assert_same_dataset w1_text_document "$GOLDEN"
check_startup out.txt 1 "$CORPUS"
check_progress err.txt 1000

step "--workers 2 --log-interval 100: identical, and a progress line every 100 documents"
assert_succeeds "$PREPROCESS" "${TOKENIZER[@]}" --append-eod --workers 2 --log-interval 100 \
  --input "$CORPUS" --output-prefix w2
assert_same_dataset w2_text_document "$GOLDEN"
check_startup out.txt 2 "$CORPUS"
check_progress err.txt 100
assert_eq 5 "$(wc -l <err.txt)" "number of progress lines for $DOCS documents"

step "--log-interval 7 --workers 3: a progress line every 7 documents"
assert_succeeds "$PREPROCESS" "${TOKENIZER[@]}" --append-eod --workers 3 --log-interval 7 \
  --input "$CORPUS" --output-prefix w3
assert_same_dataset w3_text_document "$GOLDEN"
check_progress err.txt 7

step "gzip copy (.gz): identical"
cp "$CORPUS" corpus.jsonl
gzip -k corpus.jsonl
assert_succeeds "$PREPROCESS" "${TOKENIZER[@]}" --append-eod --workers 2 --input corpus.jsonl.gz --output-prefix gz
assert_same_dataset gz_text_document "$GOLDEN"
check_startup out.txt 2 corpus.jsonl.gz

step "zstd copy (.zst): identical"
zstd -q corpus.jsonl -o corpus.jsonl.zst
assert_succeeds "$PREPROCESS" "${TOKENIZER[@]}" --append-eod --workers 2 --input corpus.jsonl.zst --output-prefix zst
assert_same_dataset zst_text_document "$GOLDEN"

step "corpus split into 3 files on line boundaries, passed as one glob: identical"
mkdir parts
split -l 200 corpus.jsonl parts/part_
assert_eq "parts/part_aa parts/part_ab parts/part_ac" "$(echo parts/part_*)" "split files"
assert_succeeds "$PREPROCESS" "${TOKENIZER[@]}" --append-eod --workers 2 --log-interval 100 \
  --input 'parts/part_*' --output-prefix split
assert_same_dataset split_text_document "$GOLDEN"
check_startup out.txt 2 parts/part_aa parts/part_ab parts/part_ac
check_progress err.txt 100

step "the same 3 files as plain, .gz and .zst, given as separate --input values: identical"
mkdir mixed
cp parts/part_aa mixed/
gzip -c parts/part_ab >mixed/part_ab.gz
zstd -q parts/part_ac -o mixed/part_ac.zst
assert_succeeds "$PREPROCESS" "${TOKENIZER[@]}" --append-eod --workers 2 \
  --input mixed/part_aa mixed/part_ab.gz mixed/part_ac.zst --output-prefix mixed
assert_same_dataset mixed_text_document "$GOLDEN"

step "multi-member gzip and multi-frame zstd (concatenated parts): identical"
cat <(gzip -c parts/part_aa) <(gzip -c parts/part_ab) <(gzip -c parts/part_ac) >multi.jsonl.gz
cat <(zstd -qc parts/part_aa) <(zstd -qc parts/part_ab) <(zstd -qc parts/part_ac) >multi.jsonl.zst
assert_succeeds "$PREPROCESS" "${TOKENIZER[@]}" --append-eod --workers 2 --input multi.jsonl.gz --output-prefix mgz
assert_same_dataset mgz_text_document "$GOLDEN"
assert_succeeds "$PREPROCESS" "${TOKENIZER[@]}" --append-eod --workers 2 --input multi.jsonl.zst --output-prefix mzst
assert_same_dataset mzst_text_document "$GOLDEN"

step "without --append-eod: same documents, one token fewer per non-empty document"
assert_succeeds "$PREPROCESS" "${TOKENIZER[@]}" --workers 2 --input "$CORPUS" --output-prefix noeod
assert_eq "$(stat -c %s "$GOLDEN.idx")" "$(stat -c %s noeod_text_document.idx)" "index size without EOD"
golden_tokens=$(($(stat -c %s "$GOLDEN.bin") / 2))
noeod_tokens=$(($(stat -c %s noeod_text_document.bin) / 2))
"$INFO" "$GOLDEN" >info.txt
empty=$(sed -n 's/^document tokens .* empty \([0-9]*\)$/\1/p' info.txt)
[[ $empty =~ ^[0-9]+$ ]] || { show info.txt dataset_info; fail "no empty-document count in dataset_info"; }
assert_eq $((DOCS - empty)) $((golden_tokens - noeod_tokens)) "EOD tokens dropped (= non-empty documents)"

echo "PASS preprocess_golden"
