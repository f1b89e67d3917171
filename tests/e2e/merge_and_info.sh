#!/usr/bin/env bash
# merge_datasets and dataset_info: parts of the golden corpus merge into Megatron's bytes (in name
# order), dataset_info's counts agree with the file sizes, --document decodes back to the input
# text, and damaged or missing datasets fail naming the file.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

pre() { "$PREPROCESS" "${TOKENIZER[@]}" --append-eod --workers 2 "$@"; }

step "merge 3 parts of the golden corpus (name order = input order): identical to Megatron's"
mkdir parts datasets
split -l 200 "$CORPUS" parts/part_
for part in parts/part_*; do
  assert_succeeds pre --input "$part" --output-prefix "datasets/$(basename "$part")"
done
assert_succeeds "$MERGE" --input datasets --output-prefix merged
assert_same_dataset merged "$GOLDEN"
assert_eq "datasets/part_aa_text_document datasets/part_ab_text_document datasets/part_ac_text_document" \
  "$(sed -n 's/^merged //p' out.txt | paste -sd' ')" "merge order"
assert_contains out.txt "3 datasets, $(wc -l <"$CORPUS") documents"

step "merge order is the sorted names, not the creation or input order"
mkdir reordered
for p in aa ab; do cp "datasets/part_${p}_text_document".{bin,idx} reordered/; done
cp datasets/part_ac_text_document.bin reordered/a_last_part_first.bin
cp datasets/part_ac_text_document.idx reordered/a_last_part_first.idx
cat parts/part_ac parts/part_aa parts/part_ab >reordered.jsonl
assert_succeeds pre --input reordered.jsonl --output-prefix reordered_ref
assert_succeeds "$MERGE" --input reordered --output-prefix reordered_merged
assert_same_dataset reordered_merged reordered_ref_text_document
if cmp -s reordered_merged.bin "$GOLDEN.bin"; then fail "reordered merge equals the golden order"; fi

step "merging one dataset copies it"
mkdir single
cp datasets/part_ab_text_document.{bin,idx} single/
assert_succeeds "$MERGE" --input single --output-prefix single_merged
assert_same_dataset single_merged single/part_ab_text_document

step "merge errors name the file or folder and leave no output"
OUT=$(fresh_dir out)
assert_fails_with "input folder no_such_folder does not exist" "$MERGE" --input no_such_folder --output-prefix "$OUT/m"
assert_no_outputs "$OUT"
mkdir empty
echo notes >empty/README.txt
assert_fails_with "no .bin/.idx dataset pairs found in empty" "$MERGE" --input empty --output-prefix "$OUT/m"
assert_no_outputs "$OUT"
mkdir lone
cp datasets/part_aa_text_document.{bin,idx} lone/
cp datasets/part_ab_text_document.idx lone/
assert_fails_with "lone/part_ab_text_document.idx has no matching lone/part_ab_text_document.bin" \
  "$MERGE" --input lone --output-prefix "$OUT/m"
assert_no_outputs "$OUT"
assert_fails_with "folder $OUT/missing does not exist" "$MERGE" --input datasets --output-prefix "$OUT/missing/m"
assert_no_outputs "$OUT"
assert_fails_with "is also an input" "$MERGE" --input single --output-prefix single/part_ab_text_document
assert_same_dataset single/part_ab_text_document datasets/part_ab_text_document
assert_fails_with "--multimodal" "$MERGE" --input datasets --output-prefix "$OUT/m" --multimodal
assert_no_outputs "$OUT"
mkdir damaged
cp datasets/part_aa_text_document.{bin,idx} damaged/
cp datasets/part_ab_text_document.bin damaged/zz_truncated.bin
head -c 100 datasets/part_ab_text_document.idx >damaged/zz_truncated.idx
assert_fails_with "damaged/zz_truncated.idx: truncated" "$MERGE" --input damaged --output-prefix "$OUT/m"
assert_no_outputs "$OUT"

step "dataset_info on Megatron's dataset: counts agree with the corpus and the file sizes"
assert_succeeds "$INFO" "$GOLDEN"
docs=$(wc -l <"$CORPUS")
bin_size=$(stat -c %s "$GOLDEN.bin")
idx_size=$(stat -c %s "$GOLDEN.idx")
sequences=$(((idx_size - 34 - 8 * (docs + 1)) / 12))  # .idx: 34-byte header, 12 B per sequence, 8 per doc index
assert_line out.txt "dtype            uint16"
assert_line out.txt "documents        $docs"
assert_line out.txt "sequences        $sequences"
assert_line out.txt "tokens           $((bin_size / 2))"
assert_line out.txt "token ids        0 .. 50256"
ok "documents $docs, sequences $sequences, tokens $((bin_size / 2)), uint16"

step "dataset_info --document decodes a document back to its text"
cat >tiny.jsonl <<'EOF'
{"text": "Hello, world! Caf\u00e9 \u2603 tabs\tand\nnew lines."}
{"text": ["First sentence.", " Second one."]}
{"text": ""}
EOF
assert_succeeds pre --input tiny.jsonl --output-prefix tiny
# shellcheck disable=SC2016  # a sed address, not a shell expansion
TEXT_OF=(sed -n '/^text:$/,$p')  # the decoded text follows a "text:" line
assert_succeeds "$INFO" tiny_text_document --document 0 --vocab-file "$VOCAB" --merge-file "$MERGES"
assert_line out.txt "documents        3"
assert_line out.txt "document 0: 15 tokens"
printf 'text:\nHello, world! Caf\xc3\xa9 \xe2\x98\x83 tabs\tand\nnew lines.<|endoftext|>\n' >expected.txt
"${TEXT_OF[@]}" out.txt | cmp - expected.txt || fail "document 0 decodes to something else"
ok "document 0 decodes to its text (UTF-8, tab, newline) plus <|endoftext|>"
assert_succeeds "$INFO" tiny_text_document --document 1 --vocab-file "$VOCAB" --merge-file "$MERGES"
assert_line out.txt "5962 6827 13 5498 530 13 50256"  # GPT-2 ids of "First sentence. Second one." + EOD
printf 'text:\nFirst sentence. Second one.<|endoftext|>\n' >expected.txt
"${TEXT_OF[@]}" out.txt | cmp - expected.txt || fail "document 1 decodes to something else"
ok "document 1 (two sentences) has the GPT-2 ids and decodes to its text"
assert_succeeds "$INFO" tiny_text_document --document 2
assert_line out.txt "document 2: 0 tokens"
if command -v python3 >/dev/null; then
  assert_succeeds "$INFO" "$GOLDEN" --document 1 --vocab-file "$VOCAB" --merge-file "$MERGES"
  python3 - "$CORPUS" >expected.txt <<'EOF'
import json, sys
with open(sys.argv[1], encoding="utf-8", newline="\n") as f:
    f.readline()
    text = json.loads(f.readline())["text"]
text = "".join(text) if isinstance(text, list) else text
sys.stdout.write("text:\n" + text + ("<|endoftext|>" if text else "") + "\n")
EOF
  "${TEXT_OF[@]}" out.txt | cmp - expected.txt || fail "golden document 1 does not decode to line 2's text"
  ok "golden document 1 decodes to the corpus's second line"
else
  echo "   skipped (no python3): golden document 1 against the corpus's second line"
fi

step "dataset_info errors name the file"
cp tiny_text_document.bin t.bin
cp tiny_text_document.idx t.idx
truncate -s 40 t.idx
assert_fails_with "t.idx: truncated" "$INFO" t
cp tiny_text_document.idx t.idx
truncate -s 4 t.bin
assert_fails_with "t.bin: truncated" "$INFO" t
rm t.bin
assert_fails_with "t.bin not found" "$INFO" t
cp tiny_text_document.bin t.bin
printf 'XXXX' | dd of=t.idx conv=notrunc status=none
assert_fails_with "t.idx: not a Megatron indexed dataset index (bad magic)" "$INFO" t
assert_fails_with "no_such.idx not found" "$INFO" no_such
assert_fails_with "--document 3 is out of range: tiny_text_document has 3 documents" "$INFO" tiny_text_document --document 3
assert_fails_with "add --document N" "$INFO" tiny_text_document --vocab-file "$VOCAB" --merge-file "$MERGES"

echo "PASS merge_and_info"
