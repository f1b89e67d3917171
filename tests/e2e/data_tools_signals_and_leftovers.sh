#!/usr/bin/env bash
# Lifecycle of preprocess_data and merge_datasets runs: a signal ignored
# at start stays ignored (nohup, background jobs), SIGTERM leaves no temporary, the temporaries of
# dead runs go at the next start, and a second writer of the same output is refused by name.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
require flock nohup

# spam_until_exit SIGNAL PID EXE: once PID runs EXE (the shell's and nohup's own set-up is done),
# sends SIGNAL to it until it exits; sets RC to its exit status.
spam_until_exit() {
  while [[ $(readlink "/proc/$2/exe" 2>/dev/null) != "$3" ]] && kill -0 "$2" 2>/dev/null; do sleep 0.001; done
  while kill -"$1" "$2" 2>/dev/null; do sleep 0.005; done
  RC=0
  wait "$2" || RC=$?
}

# dead_pid: prints the pid of a process that has exited.
dead_pid() {
  sh -c 'exit 0' &
  local pid=$!
  wait "$pid"
  echo "$pid"
}

PRE=("$PREPROCESS" --input "$CORPUS" "${TOKENIZER[@]}" --append-eod --workers 2)

step "nohup: SIGHUP was ignored at start, so it stays ignored"
out=$(fresh_dir nohup)
nohup "${PRE[@]}" --output-prefix "$out/p" >"$WORK/out.txt" 2>"$WORK/err.txt" &
spam_until_exit HUP $! "$PREPROCESS"
[[ $RC -eq 0 ]] || { show "$WORK/err.txt" stderr; fail "preprocess_data under nohup died on SIGHUP (exit $RC)"; }
assert_same_dataset "$out/p_text_document" "$GOLDEN"

step "a background job of a script starts with SIGINT ignored: it stays ignored"
out=$(fresh_dir background)
"${PRE[@]}" --output-prefix "$out/p" >"$WORK/out.txt" 2>"$WORK/err.txt" &
spam_until_exit INT $! "$PREPROCESS"
[[ $RC -eq 0 ]] || { show "$WORK/err.txt" stderr; fail "background preprocess_data died on SIGINT (exit $RC)"; }
assert_same_dataset "$out/p_text_document" "$GOLDEN"

step "SIGTERM (not ignored) still stops the run, leaving no temporary and no lock file"
out=$(fresh_dir term)
"${PRE[@]}" --output-prefix "$out/p" >"$WORK/out.txt" 2>"$WORK/err.txt" &
spam_until_exit TERM $! "$PREPROCESS"
[[ $RC -eq 143 ]] || fail "expected death by SIGTERM (exit 143), got $RC"
assert_no_outputs "$out"

step "the temporaries of a dead run of the same output go at the next start, one line says so"
out=$(fresh_dir stale)
dead=$(dead_pid)
printf 'partial' >"$out/p_text_document.bin.tmp.$dead.0"
printf 'partial' >"$out/p_text_document.idx.tmp.$dead.1"
printf 'live' >"$out/p_text_document.bin.tmp.$$.2"  # this shell runs: a live writer's, kept
printf 'other' >"$out/q_text_document.bin.tmp.$dead.0"  # another output's, kept
assert_succeeds "${PRE[@]}" --output-prefix "$out/p"
assert_contains "$WORK/err.txt" "removed 2 temporaries left by runs that did not finish: $out/p_text_document"
[[ $(grep -c "removed" "$WORK/err.txt") -eq 1 ]] || fail "expected one line about removed temporaries"
[[ ! -e $out/p_text_document.bin.tmp.$dead.0 && ! -e $out/p_text_document.idx.tmp.$dead.1 ]] ||
  fail "the dead run's temporaries are still there"
[[ -e $out/p_text_document.bin.tmp.$$.2 && -e $out/q_text_document.bin.tmp.$dead.0 ]] ||
  fail "a live writer's or another output's temporary was removed"
assert_same_dataset "$out/p_text_document" "$GOLDEN"
[[ ! -e $out/p_text_document.lock ]] || fail "the lock file stays after a finished run"
ok "dead run's temporaries removed, the others kept"

step "a second writer of the same output is refused at start, naming the holder"
out=$(fresh_dir locked)
exec 9>"$out/p_text_document.lock"
flock -n 9 || fail "cannot take the lock for the test"
printf '%s\n%s\n' "$$" "preprocess_data --output-prefix $out/p (the first run)" >&9
assert_fails_with "process $$ (preprocess_data --output-prefix $out/p (the first run)) is writing the same output" \
  "${PRE[@]}" --output-prefix "$out/p"
assert_contains "$WORK/err.txt" "$out/p_text_document.lock"
[[ $(find "$out" -name '*.bin*' | wc -l) -eq 0 ]] || fail "the refused run wrote something"
mkdir -p "$WORK/merge_in"
cp "$GOLDEN.bin" "$WORK/merge_in/g.bin"
cp "$GOLDEN.idx" "$WORK/merge_in/g.idx"
assert_fails_with "is writing the same output" "$MERGE" --input "$WORK/merge_in" --output-prefix "$out/p_text_document"
exec 9>&-  # the holder ends: the lock goes with it
assert_succeeds "${PRE[@]}" --output-prefix "$out/p"
assert_same_dataset "$out/p_text_document" "$GOLDEN"
ok "runs once the holder is gone"

echo "PASS"
