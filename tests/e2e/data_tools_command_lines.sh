#!/usr/bin/env bash
# Command-line hardening of preprocess_data, merge_datasets and dataset_info: argparse's rule for
# a repeated flag (the last value wins, with a note), exit status 1 and the tool's name on every
# usage error, negative numbers refused instead of wrapped, standard output checked at exit, and
# decoded text printed whole (NUL tokens included).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

printf '%s\n' '{"text": "hello"}' '{"text": "a\u0000b"}' >good.jsonl
OUT=$(fresh_dir out)

# usage_error TOOL SUBSTRING CMD...: CMD exits exactly 1, its stderr has "TOOL: error: " and
# SUBSTRING, and every stderr line that is not indented names the tool.
usage_error() {
  local tool=$1 expected=$2
  shift 2
  assert_fails_with "$expected" "$@"
  assert_eq 1 "$RC" "exit status of: $tool ${*:2}"
  assert_contains err.txt "$tool: error: "
  if grep -v '^ ' err.txt | grep -v "^$tool: " >/dev/null; then
    show err.txt stderr
    fail "a stderr line without the tool's name"
  fi
}

step "parse errors exit 1 with the tool's name (CLI11 exited 104/106/114 without it)"
usage_error preprocess_data "--workers = abc" "$PREPROCESS" "${TOKENIZER[@]}" --input good.jsonl --output-prefix "$OUT/p" --workers abc
usage_error preprocess_data "unknown flag --bogus" "$PREPROCESS" "${TOKENIZER[@]}" --input good.jsonl --output-prefix "$OUT/p" --bogus
usage_error merge_datasets "--output-prefix is required" "$MERGE" --input "$OUT"
usage_error merge_datasets "--input" "$MERGE" --input
usage_error dataset_info "--data-path is required" "$INFO"
usage_error dataset_info "--max-ids = x" "$INFO" "$GOLDEN" --max-ids x
usage_error dataset_info "unexpected argument 'extra'" "$INFO" "$GOLDEN" extra
assert_no_outputs "$OUT"

step "negative numbers are refused, not wrapped around"
usage_error preprocess_data "--log-interval must be at least 1, got -1" \
  "$PREPROCESS" "${TOKENIZER[@]}" --input good.jsonl --output-prefix "$OUT/p" --log-interval -1
assert_no_outputs "$OUT"
usage_error dataset_info "--document must be >= 0, got -1" "$INFO" "$GOLDEN" --document -1
if grep -q 18446744073709551615 err.txt; then fail "--document -1 wrapped around"; fi
usage_error dataset_info "--max-ids must be >= 0 (0 prints all), got -2" "$INFO" "$GOLDEN" --document 0 --max-ids -2

step "a repeated flag: the last value wins, with a note (all tools)"
assert_succeeds "$PREPROCESS" "${TOKENIZER[@]}" --input good.jsonl --output-prefix "$OUT/x" --output-prefix "$OUT/p" \
  --workers 1 --workers 2 --append-eod --append-eod
assert_line out.txt "Processing data with 2 workers."
assert_line err.txt "preprocess_data: note: --output-prefix given 2 times; the last value ($OUT/p) is used"
assert_line err.txt "preprocess_data: note: --workers given 2 times; the last value (2) is used"
if grep -q -- "--append-eod given" err.txt; then fail "a note for a repeated flag that takes no value"; fi
[[ -e $OUT/p_text_document.bin && ! -e $OUT/x_text_document.bin ]] || fail "the first --output-prefix was used"
ok "the last --output-prefix was written"
assert_succeeds "$INFO" "$OUT/p_text_document" --document 0 --max-ids 1 --document 1
assert_line out.txt "document 1: 4 tokens"
assert_line err.txt "dataset_info: note: --document given 2 times; the last value (1) is used"
mkdir parts
cp "$OUT/p_text_document.bin" parts/a.bin
cp "$OUT/p_text_document.idx" parts/a.idx
assert_succeeds "$MERGE" --input nowhere --input parts --output-prefix merged
assert_line err.txt "merge_datasets: note: --input given 2 times; the last value (parts) is used"
assert_contains out.txt "wrote merged.{bin,idx}: 1 datasets, 2 documents"

step "dataset_info prints decoded text whole: a NUL token does not end it"
assert_succeeds "$INFO" "$OUT/p_text_document" --document 1 "${TOKENIZER[@]}"
printf 'text:\na\0b<|endoftext|>\n' >expected.txt
cmp <(tail -c "$(wc -c <expected.txt)" out.txt) expected.txt || fail "the decoded text lost its bytes after the NUL"
ok "decoded text: a, NUL, b, <|endoftext|>"

step "standard output is checked at exit: a full disk is an error (exit 1), not success"
[[ -w /dev/full ]] || fail "/dev/full is needed"
for cmd in "$INFO $GOLDEN" "$PREPROCESS --help" "$MERGE --help" "$INFO --help"; do
  RC=0
  # shellcheck disable=SC2086  # the words of $cmd are the command line
  $cmd >/dev/full 2>err.txt || RC=$?
  assert_eq 1 "$RC" "exit status of $(basename "${cmd%% *}") >/dev/full"
  assert_contains err.txt "error: cannot write to standard output"
done
RC=0
"$PREPROCESS" "${TOKENIZER[@]}" --input good.jsonl --output-prefix "$OUT/full" --workers 1 >/dev/full 2>err.txt || RC=$?
assert_eq 1 "$RC" "exit status of preprocess_data >/dev/full"
assert_contains err.txt "preprocess_data: error: cannot write to standard output"

echo "PASS"
