#!/usr/bin/env bash
# preprocess_data on invalid jsonl lines: each kind fails with file:LINE and the reason, leaving no
# file under the final names and no temporaries; --skip-invalid-lines warns per line and writes
# exactly the dataset of the file without those lines. Blank lines, a BOM, CRLF are accepted.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require gzip zstd

pre() { "$PREPROCESS" "${TOKENIZER[@]}" --append-eod "$@"; }

# Eight valid documents: strings, a list of sentences, escapes, a surrogate pair, an empty text.
cat >clean.jsonl <<'EOF'
{"text": "The first document."}
{"id": 2, "text": ["A list of sentences.", " Each one is a sequence."], "meta": {"x": [1, 2.5e3, null, true]}}
{"text": "Escapes: \"quoted\", tab\there, newline\nthere, slash \/ and \u00e9t\u00e9."}
{"text": "An emoji from a surrogate pair: \ud83d\ude00 and one raw: 😀."}
{"text": ""}
{"text": "Caf\u00e9 ☃ 日本語のテキスト"}
{"text": []}
{"text": "The last document.", "text_extra": "ignored"}
EOF
assert_succeeds pre --input clean.jsonl --output-prefix clean
CLEAN=clean_text_document
"$INFO" "$CLEAN" >info.txt
grep -qE '^documents +8$' info.txt || { show info.txt dataset_info; fail "clean.jsonl should give 8 documents"; }

# The invalid lines and the reason each must report.
BAD_LINES=(
  '{"text": "unterminated string'
  '{"title": "no text key"}'
  '{"text": 42}'
  '{"text": ["fine", 3]}'
  $'{"text": "bad \xff byte"}'
  '{"text": "lone \ud800 surrogate"}'
  '["not", "an", "object"]'
  '{"text": null}'
  '{"text": "ok"} trailing'
)
REASONS=(
  'invalid JSON'
  'no "text" key'
  '"text" is a number, not a string or a list of strings'
  '"text"[1] is a number, not a string'
  'invalid UTF-8'
  'lone surrogate escape \ud800'
  'the line is not a JSON object'
  '"text" is null, not a string or a list of strings'
  'invalid JSON'
)

step "each invalid line fails with file:LINE and the reason; nothing is left behind"
for i in "${!BAD_LINES[@]}"; do
  { head -n 3 clean.jsonl; printf '%s\n' "${BAD_LINES[$i]}"; tail -n +4 clean.jsonl; } >bad.jsonl
  out=$(fresh_dir out)
  assert_fails_with "bad.jsonl:4: ${REASONS[$i]}" pre --workers 2 --input bad.jsonl --output-prefix "$out/p"
  assert_contains err.txt "use --skip-invalid-lines"
  assert_no_outputs "$out"
done

step "line numbers stay exact past batch boundaries, across files, in compressed files, after blank lines"
awk 'BEGIN { for (i = 1; i <= 3000; i++) print (i == 2500 ? "{\"text\": 1}" : "{\"text\": \"document " i "\"}") }' >big.jsonl
for workers in 1 4; do
  out=$(fresh_dir out)
  assert_fails_with "big.jsonl:2500: \"text\" is a number" pre --workers "$workers" --input big.jsonl --output-prefix "$out/p"
  assert_no_outputs "$out"
done
gzip -k big.jsonl
zstd -q big.jsonl -o big.jsonl.zst
for f in big.jsonl.gz big.jsonl.zst; do
  out=$(fresh_dir out)
  assert_fails_with "$f:2500: \"text\" is a number" pre --workers 2 --input "$f" --output-prefix "$out/p"
  assert_no_outputs "$out"
done
out=$(fresh_dir out)
assert_fails_with "big.jsonl:2500:" pre --workers 2 --input clean.jsonl big.jsonl --output-prefix "$out/p"
assert_no_outputs "$out"
printf '\n  \n{"text": 7}\n' >blank_then_bad.jsonl
out=$(fresh_dir out)
assert_fails_with "blank_then_bad.jsonl:3: \"text\" is a number" pre --input blank_then_bad.jsonl --output-prefix "$out/p"
assert_no_outputs "$out"

step "--skip-invalid-lines: one warning per line naming file:LINE; output = the file without them"
# Clean line k becomes line 2k-1, bad line k line 2k.
: >mixed.jsonl
for k in $(seq 1 8); do
  sed -n "${k}p" clean.jsonl >>mixed.jsonl
  if ((k <= ${#BAD_LINES[@]})); then printf '%s\n' "${BAD_LINES[$((k - 1))]}" >>mixed.jsonl; fi
done
printf '%s\n' "${BAD_LINES[8]}" >>mixed.jsonl  # the ninth bad line last, as line 17
for workers in 1 3; do
  assert_succeeds pre --workers "$workers" --skip-invalid-lines --input mixed.jsonl --output-prefix "skip$workers"
  assert_same_dataset "skip${workers}_text_document" "$CLEAN"
  for i in "${!BAD_LINES[@]}"; do
    line=$((2 * i + 2))
    ((i < 8)) || line=17
    assert_contains err.txt "WARNING: mixed.jsonl:$line: ${REASONS[$i]}"
  done
  assert_eq 9 "$(grep -c '^WARNING: mixed.jsonl:' err.txt)" "warnings with --workers $workers"
  assert_contains out.txt "9 invalid lines skipped"
done
sed '2500d' big.jsonl >big_fixed.jsonl
assert_succeeds pre --workers 2 --input big_fixed.jsonl --output-prefix big_fixed
assert_succeeds pre --workers 2 --skip-invalid-lines --input big.jsonl.zst --output-prefix big_skip
assert_same_dataset big_skip_text_document big_fixed_text_document
assert_contains err.txt "WARNING: big.jsonl.zst:2500:"

step "--skip-invalid-lines with many bad lines: 20 warnings, then a note, then the count"
awk 'BEGIN { for (i = 1; i <= 60; i++) print (i % 2 ? "{\"text\": \"ok " i "\"}" : "not json") }' >many_bad.jsonl
grep -v '^not json$' many_bad.jsonl >many_good.jsonl
assert_succeeds pre --workers 2 --input many_good.jsonl --output-prefix many_good
assert_succeeds pre --workers 2 --skip-invalid-lines --input many_bad.jsonl --output-prefix many_skip
assert_same_dataset many_skip_text_document many_good_text_document
assert_eq 20 "$(grep -c '^WARNING: many_bad.jsonl:[0-9]*: invalid JSON' err.txt)" "per-line warnings"
assert_contains err.txt "further invalid lines are skipped without a warning"
assert_contains out.txt "30 invalid lines skipped"

step "blank lines, a UTF-8 BOM, CRLF line ends, no final newline: same output as the clean file"
{ printf '\xef\xbb\xbf'; sed -n 1,3p clean.jsonl; printf '\n   \n\t\n'; sed -n 4,8p clean.jsonl; printf '\n\n'; } >blank_bom.jsonl
assert_succeeds pre --workers 2 --input blank_bom.jsonl --output-prefix blank_bom
assert_same_dataset blank_bom_text_document "$CLEAN"
assert_contains out.txt "5 blank lines"
sed 's/$/\r/' clean.jsonl >crlf.jsonl
assert_succeeds pre --workers 2 --input crlf.jsonl --output-prefix crlf
assert_same_dataset crlf_text_document "$CLEAN"
head -c -1 clean.jsonl >no_final_newline.jsonl
assert_succeeds pre --workers 2 --input no_final_newline.jsonl --output-prefix nfn
assert_same_dataset nfn_text_document "$CLEAN"

step "several --json-keys: one dataset per key, each equal to a run on that key alone"
cat >keys.jsonl <<'EOF'
{"title": "First title", "text": "First body text."}
{"text": ["Second", " body."], "title": ""}
{"title": ["A title", " in two parts"], "text": "Third body."}
EOF
sed -E 's/"text"/"body"/; s/"title"/"text"/' keys.jsonl >title_as_text.jsonl
assert_succeeds pre --workers 2 --input title_as_text.jsonl --output-prefix only_title
assert_succeeds pre --workers 2 --input keys.jsonl --output-prefix only_text
assert_succeeds pre --workers 2 --json-keys text title --input keys.jsonl --output-prefix both
assert_same_dataset both_text_document only_text_text_document
assert_same_dataset both_title_document only_title_text_document
assert_line out.txt "Wrote both_text_document.bin and both_text_document.idx (uint16)"
assert_line out.txt "Wrote both_title_document.bin and both_title_document.idx (uint16)"
printf '%s\n' '{"text": "a", "title": "b"}' '{"text": "c"}' >missing_title.jsonl
out=$(fresh_dir out)
assert_fails_with 'missing_title.jsonl:2: no "title" key' pre --json-keys text title --input missing_title.jsonl --output-prefix "$out/p"
assert_no_outputs "$out"

echo "PASS preprocess_bad_input"
