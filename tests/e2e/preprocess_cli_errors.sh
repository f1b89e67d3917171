#!/usr/bin/env bash
# preprocess_data's command-line checks: bad inputs, outputs, tokenizer files and flags are
# rejected before any work starts (nothing on stdout, no file written), with a message naming the
# flag and value, and several problems of one command line are reported together.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

printf '%s\n' '{"text": "hello"}' '{"text": "world"}' >good.jsonl
OUT=$(fresh_dir out)
GOOD=(--input good.jsonl --output-prefix "$OUT/p")

# rejects SUBSTRING ARG...: preprocess_data ARG... fails with SUBSTRING on stderr, before any work
# (stdout empty: no "Opening" line), and writes nothing into $OUT.
rejects() {
  local expected=$1
  shift
  assert_fails_with "$expected" "$PREPROCESS" "$@"
  assert_empty out.txt "stdout of a rejected command line"
  assert_no_outputs "$OUT"
}

# unless_root REASON: true for non-root; as root prints why the sub-case is skipped.
unless_root() {
  if ((IS_ROOT)); then
    echo "   skipped (running as root, which reads files whatever their mode): $1"
    return 1
  fi
}

step "sanity: the good command line succeeds (and is what the cases below break)"
assert_succeeds "$PREPROCESS" "${TOKENIZER[@]}" "${GOOD[@]}"
assert_line out.txt "Wrote $OUT/p_text_document.bin and $OUT/p_text_document.idx (uint16)"
rm -f "$OUT"/*
assert_succeeds "$PREPROCESS" --help
assert_contains out.txt "--skip-invalid-lines"

step "inputs: missing file, glob matching nothing, folder, unreadable file"
rejects "--input nope.jsonl cannot be read: No such file or directory" \
  "${TOKENIZER[@]}" --input nope.jsonl --output-prefix "$OUT/p"
rejects "--input nothing_*.jsonl: the pattern matches no file" \
  "${TOKENIZER[@]}" --input 'nothing_*.jsonl' --output-prefix "$OUT/p"
rejects "--input no_folder/*.jsonl: cannot read the folders the pattern names" \
  "${TOKENIZER[@]}" --input 'no_folder/*.jsonl' --output-prefix "$OUT/p"
mkdir a_folder
rejects "--input a_folder is not a regular file" "${TOKENIZER[@]}" --input a_folder --output-prefix "$OUT/p"
rejects "--input: no input file given" "${TOKENIZER[@]}" --output-prefix "$OUT/p"
if unless_root "unreadable --input"; then
  cp good.jsonl unreadable.jsonl
  chmod 000 unreadable.jsonl
  rejects "--input unreadable.jsonl is not readable (permission denied)" \
    "${TOKENIZER[@]}" --input unreadable.jsonl --output-prefix "$OUT/p"
fi

step "output: missing folder, no --output-prefix, unwritable folder"
rejects "--output-prefix $OUT/missing/p_text_document: folder $OUT/missing does not exist; create it first" \
  "${TOKENIZER[@]}" --input good.jsonl --output-prefix "$OUT/missing/p"
rejects "--output-prefix is required" "${TOKENIZER[@]}" --input good.jsonl
if unless_root "unwritable output folder"; then
  mkdir read_only
  chmod 555 read_only
  rejects "folder read_only is not writable" "${TOKENIZER[@]}" --input good.jsonl --output-prefix read_only/p
fi

step "tokenizer files: missing, not given, invalid, unreadable"
rejects "--vocab-file nope.json cannot be read: No such file or directory" \
  --tokenizer-type GPT2BPETokenizer --vocab-file nope.json --merge-file "$MERGES" "${GOOD[@]}"
rejects "--merge-file nope.txt cannot be read: No such file or directory" \
  --tokenizer-type GPT2BPETokenizer --vocab-file "$VOCAB" --merge-file nope.txt "${GOOD[@]}"
rejects "--tokenizer-type GPT2BPETokenizer needs --vocab-file" \
  --tokenizer-type GPT2BPETokenizer --merge-file "$MERGES" "${GOOD[@]}"
rejects "--tokenizer-type GPT2BPETokenizer needs --merge-file" \
  --tokenizer-type GPT2BPETokenizer --vocab-file "$VOCAB" "${GOOD[@]}"
echo '{"a":' >broken_vocab.json
rejects "broken_vocab.json: not a valid vocab.json" \
  --tokenizer-type GPT2BPETokenizer --vocab-file broken_vocab.json --merge-file "$MERGES" "${GOOD[@]}"
if unless_root "unreadable --vocab-file / --merge-file"; then
  cp "$VOCAB" vocab.json
  cp "$MERGES" merges.txt
  chmod 000 vocab.json merges.txt
  rejects "--vocab-file vocab.json is not readable (permission denied)" \
    --tokenizer-type GPT2BPETokenizer --vocab-file vocab.json --merge-file "$MERGES" "${GOOD[@]}"
  rejects "--merge-file merges.txt is not readable (permission denied)" \
    --tokenizer-type GPT2BPETokenizer --vocab-file "$VOCAB" --merge-file merges.txt "${GOOD[@]}"
fi

step "flags: typos suggest the flag, unsupported Megatron flags say why"
rejects "unknown flag --apend-eod; did you mean --append-eod?" "${TOKENIZER[@]}" "${GOOD[@]}" --apend-eod
rejects "unknown flag --jsonkeys; did you mean --json-keys?" "${TOKENIZER[@]}" "${GOOD[@]}" --jsonkeys text
rejects "--split-sentences is not supported yet: sentence splitting (NLTK punkt) is not implemented" \
  "${TOKENIZER[@]}" "${GOOD[@]}" --split-sentences
rejects "--partitions 2 is not supported" "${TOKENIZER[@]}" "${GOOD[@]}" --partitions 2 --workers 2
rejects "--tokenizer-type BertWordPieceCase is a Megatron tokenizer this build does not implement yet" \
  --tokenizer-type BertWordPieceCase "${GOOD[@]}"
rejects "--tokenizer-type Bogus is not a Megatron tokenizer type; supported: GPT2BPETokenizer" \
  --tokenizer-type Bogus --vocab-file "$VOCAB" --merge-file "$MERGES" "${GOOD[@]}"

step "values: workers, log interval, repeated key, not a number"
rejects "--workers must be at least 1 (got 0)" "${TOKENIZER[@]}" "${GOOD[@]}" --workers 0
rejects "--log-interval must be at least 1" "${TOKENIZER[@]}" "${GOOD[@]}" --log-interval 0
rejects '--json-keys: "text" is given twice' "${TOKENIZER[@]}" "${GOOD[@]}" --json-keys text text
rejects "--workers" "${TOKENIZER[@]}" "${GOOD[@]}" --workers abc

step "several problems in one command line are reported together"
rejects "invalid command line: 9 problems:" --tokenizer-type Bogus --input nope.jsonl 'nothing_*.jsonl' \
  --output-prefix "$OUT/missing/p" --apend-eod --split-sentences --partitions 2 --workers 0 \
  --log-interval 0
for expected in "unknown flag --apend-eod; did you mean --append-eod?" \
  "--split-sentences is not supported yet" \
  "--partitions 2 is not supported" \
  "--input nope.jsonl cannot be read" \
  "--input nothing_*.jsonl: the pattern matches no file" \
  "--workers must be at least 1 (got 0)" \
  "--log-interval must be at least 1" \
  "folder $OUT/missing does not exist" \
  "--tokenizer-type Bogus is not a Megatron tokenizer type"; do
  assert_contains err.txt "$expected"
done
ok "all 9 problems named"
rejects "invalid command line: 3 problems:" --tokenizer-type GPT2BPETokenizer --merge-file "$MERGES"
for expected in "--input: no input file given" "--output-prefix is required" "needs --vocab-file"; do
  assert_contains err.txt "$expected"
done
ok "missing --input, --output-prefix and --vocab-file named together"

echo "PASS preprocess_cli_errors"
