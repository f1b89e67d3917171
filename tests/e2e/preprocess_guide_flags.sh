#!/usr/bin/env bash
# Command lines from Megatron-LM's guides run unchanged: argparse's abbreviated long flags (the
# Neuron guide's --vocab), flags of older Megatron versions that change nothing (--dataset-impl
# mmap, --chunk-size, --legacy-tokenizer) with a one-line note, and refusals for values that
# cannot be honoured and for ambiguous abbreviations. merge_datasets abbreviates the same way.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The guide's files, under the guide's names, in the current folder.
cp "$CORPUS" mergedfile.json
cp "$VOCAB" gpt2-vocab.json
cp "$MERGES" gpt2-merges.txt

step "the Neuron guide's command, exactly as written: same bytes as Megatron, one note"
assert_succeeds "$PREPROCESS" --input mergedfile.json --output-prefix my-gpt2 --vocab gpt2-vocab.json \
  --dataset-impl mmap --tokenizer-type GPT2BPETokenizer --merge-file gpt2-merges.txt --append-eod --workers 70
assert_same_dataset my-gpt2_text_document "$GOLDEN"
assert_line err.txt "preprocess_data: note: --dataset-impl mmap (from older Megatron versions) is accepted and changes nothing: Megatron's mmap format is the only one written"
assert_eq 1 "$(grep -c 'note:' err.txt)" "notes printed"

step "abbreviations of every flag, --flag=value spelling, the 23.04 guide's --chunk-size and --legacy-tokenizer"
assert_succeeds "$PREPROCESS" --inp mergedfile.json --output-p=abbrev --vocab-f gpt2-vocab.json --tokenizer-t GPT2BPETokenizer \
  --merge gpt2-merges.txt --append --workers 2 --chunk-size 25 --legacy-tokenizer --log-i 100000
assert_same_dataset abbrev_text_document "$GOLDEN"
assert_contains err.txt "note: --chunk-size 25 (from older Megatron versions) is accepted and changes nothing"
assert_contains err.txt "note: --legacy-tokenizer (from older Megatron versions) is accepted and changes nothing"

OUT=$(fresh_dir out)
GUIDE=(--input mergedfile.json --output-prefix "$OUT/p" --vocab gpt2-vocab.json --tokenizer-type GPT2BPETokenizer
       --merge-file gpt2-merges.txt --append-eod)
step "refused before any work, nothing written"
for impl in lazy cached; do
  assert_fails_with "--dataset-impl $impl is not supported: only Megatron's mmap .bin/.idx format is written" \
    "$PREPROCESS" "${GUIDE[@]}" --dataset-impl "$impl"
  assert_no_outputs "$OUT"
done
assert_fails_with "argument --dataset-impl: invalid choice: 'fast' (choose from 'lazy', 'cached', 'mmap')" \
  "$PREPROCESS" "${GUIDE[@]}" --dataset-impl fast
assert_fails_with "argument --chunk-size: invalid int value: 'big'" "$PREPROCESS" "${GUIDE[@]}" --chunk-size big
assert_fails_with "ambiguous option: --l could match --lang, --legacy-tokenizer, --log-interval" \
  "$PREPROCESS" "${GUIDE[@]}" --l 10
! grep -q 'unknown flag\|unexpected argument' err.txt || { show err.txt stderr; fail "--l 10 reported more than once"; }
assert_fails_with "ambiguous option: --to could match --tokenizer-model, --tokenizer-special-tokens, --tokenizer-type" \
  "$PREPROCESS" "${GUIDE[@]}" --to GPT2BPETokenizer
# --workers is a prefix of --workers-to-check (Megatron's benchmark mode): spelled in full only.
assert_fails_with "ambiguous option: --work could match --workers, --workers-to-check" "$PREPROCESS" "${GUIDE[@]}" --work 2
assert_fails_with "unknown flag --vocab-flie; did you mean --vocab-file?" "$PREPROCESS" "${GUIDE[@]}" --vocab-flie x
assert_no_outputs "$OUT"

step "merge_datasets: abbreviated flags"
mkdir parts
cp my-gpt2_text_document.bin parts/a.bin
cp my-gpt2_text_document.idx parts/a.idx
assert_succeeds "$MERGE" --inp parts --output-p merged
assert_same_dataset merged "$GOLDEN"
assert_fails_with "unknown flag" "$MERGE" --in parts --output-prefix merged2 --bogus
echo "PASS preprocess_guide_flags"
