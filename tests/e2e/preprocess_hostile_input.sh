#!/usr/bin/env bash
# preprocess_data under hostile input and limits: threads that cannot start, an input that
# is an output, literal names with glob characters, Python's universal newlines (CR-only files,
# compared with python3 reading the file in text mode), a BOM after the first line, UTF-16, and a
# zero-padded .gz that gzip accepts. Each failure exits 1 with its message and leaves no file.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require gzip python3

pre() { "$PREPROCESS" "${TOKENIZER[@]}" --append-eod "$@"; }

head -n 40 "$CORPUS" >clean.jsonl
assert_succeeds pre --workers 2 --input clean.jsonl --output-prefix clean
CLEAN=clean_text_document

step "threads that cannot start: exit 1 naming the limit and --workers, no temporaries"
out=$(fresh_dir limited)
cp clean.jsonl "$out/in.jsonl"
chmod 755 "$WORK" "$out"
chmod 644 "$out/in.jsonl"
# RLIMIT_NPROC binds only users without CAP_SYS_RESOURCE: as root, run as nobody.
if [[ $IS_ROOT -eq 1 ]] && command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
  chmod 777 "$out"
  running=$( (ps -L -u nobody --no-headers || true) | wc -l)
  as_limited=(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups prlimit --nproc=$((running + 4)))
elif [[ $IS_ROOT -eq 0 ]] && command -v prlimit >/dev/null; then
  running=$( (ps -L -u "$(id -u)" --no-headers || true) | wc -l)
  as_limited=(prlimit --nproc=$((running + 4)))
else
  as_limited=()
fi
if [[ ${#as_limited[@]} -gt 0 ]]; then
  cd "$out"
  run_capture "${as_limited[@]}" "$PREPROCESS" "${TOKENIZER[@]}" --workers 64 --input in.jsonl --output-prefix p
  cd "$WORK"
  [[ $RC -eq 1 ]] || { show "$WORK/err.txt" stderr; fail "expected exit 1 under a thread limit, got $RC"; }
  assert_contains "$WORK/err.txt" "cannot start worker thread"
  assert_contains "$WORK/err.txt" "use fewer --workers"
  left=$(find "$out" -mindepth 1 ! -name in.jsonl -print)
  [[ -z $left ]] || fail "files left in $out: $left"
  ok "exit 1, message names the limit, nothing left beside the input"
else
  echo "   skipped: neither setpriv (as root) nor prlimit is available"
fi

step "an absurd --workers is refused up front"
out=$(fresh_dir workers)
assert_fails_with "--workers 100000 is more than 1024" pre --workers 100000 --input clean.jsonl --output-prefix "$out/p"
assert_eq 1 "$RC" "exit code"
assert_no_outputs "$out"

step "an input that is one of the outputs is refused and left intact"
out=$(fresh_dir self)
cp clean_text_document.bin clean_text_document.idx "$out/"
sum=$(cat "$out"/* | cksum)
assert_fails_with "--input $out/clean_text_document.bin is the output file" \
  pre --input "$out/clean_text_document.bin" --output-prefix "$out/clean"
ln -s "$out/clean_text_document.idx" link.jsonl
assert_fails_with "--input link.jsonl is the output file $out/clean_text_document.idx" \
  pre --input link.jsonl --output-prefix "$out/clean"
assert_eq "$sum" "$(cat "$out"/* | cksum)" "checksum of the outputs that were inputs"

step "an existing name is opened as it is, even with [ ] *; a missing one is a pattern"
out=$(fresh_dir literal)
cp clean.jsonl "$out/data[1].jsonl"
echo '{"text": "not me"}' >"$out/data1.jsonl"
assert_succeeds pre --input "$out/data[1].jsonl" --output-prefix "$out/lit"
assert_same_dataset "$out/lit_text_document" "$CLEAN"
rm "$out/data[1].jsonl"
cp clean.jsonl "$out/data1.jsonl"
assert_succeeds pre --input "$out/data[1].jsonl" --output-prefix "$out/pat"
assert_same_dataset "$out/pat_text_document" "$CLEAN"

step "CR, LF and CRLF end lines as in Python's text mode; other boundaries do not"
# Line ends mixed: CR only for some lines, CRLF for others; NEL, U+2028, U+2029 inside a text.
python3 - clean.jsonl mixed.jsonl <<'EOF'
import sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")[:-1]
lines[3] = lines[3].replace("\"text\": \"", "\"text\": \"\x85\u2028\u2029", 1)
ends = ["\r", "\r\n", "\n", "\r"]
with open(sys.argv[2], "wb") as f:
    for i, line in enumerate(lines):
        f.write(line.encode("utf-8") + ends[i % 4].encode())
EOF
python3 -c 'import sys; open(sys.argv[2], "w", encoding="utf-8").writelines(open(sys.argv[1], encoding="utf-8"))' \
  mixed.jsonl python_lines.jsonl
assert_eq 40 "$(wc -l <python_lines.jsonl)" "lines Python reads"
assert_succeeds pre --input python_lines.jsonl --output-prefix python_lines
assert_succeeds pre --workers 3 --input mixed.jsonl --output-prefix mixed
assert_same_dataset mixed_text_document python_lines_text_document
tr '\n' '\r' <clean.jsonl >cr_only.jsonl
assert_succeeds pre --input cr_only.jsonl --output-prefix cr_only
assert_same_dataset cr_only_text_document "$CLEAN"

step "a BOM after the first line is named as such"
{ sed -n 1,2p clean.jsonl; printf '\xef\xbb\xbf'; sed -n 3,4p clean.jsonl; } >bom_inside.jsonl
assert_fails_with "bom_inside.jsonl:3: the line starts with a UTF-8 byte-order mark (BOM" \
  pre --input bom_inside.jsonl --output-prefix "$(fresh_dir bom)/p"

step "UTF-16 input is named as such"
for enc in utf-16 utf-16-le utf-16-be; do
  python3 -c 'import sys; open(sys.argv[2], "w", encoding=sys.argv[3]).write(open(sys.argv[1], encoding="utf-8").read())' \
    clean.jsonl "$enc.jsonl" "$enc"
  out=$(fresh_dir "$enc")
  assert_fails_with "$enc.jsonl: looks like UTF-16" pre --input "$enc.jsonl" --output-prefix "$out/p"
  assert_no_outputs "$out"
done

step "zero bytes after the last gzip member are ignored, as gzip does"
{ gzip -c clean.jsonl; head -c 4096 /dev/zero; } >padded.jsonl.gz
gzip -t padded.jsonl.gz
assert_succeeds pre --input padded.jsonl.gz --output-prefix padded
assert_same_dataset padded_text_document "$CLEAN"
{ gzip -c clean.jsonl; head -c 16 /dev/zero; printf 'junk'; } >junk.jsonl.gz
assert_fails_with "junk.jsonl.gz: data after the zero padding" pre --input junk.jsonl.gz --output-prefix "$(fresh_dir junk)/p"
echo "PASS"
