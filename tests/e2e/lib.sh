# Shared set-up and assertions for the end-to-end scripts; sourced, never run on its own.
# The paths a script needs come from one file the build writes, tests/e2e/e2e.env in the build
# folder, named by MEGATRON_E2E_ENV (CTest sets it; by hand:
#   MEGATRON_E2E_ENV=build/tests/e2e/e2e.env bash tests/e2e/<script>.sh [CASE]).
# It names the tools (PREPROCESS, MERGE, INFO; TRAIN, CONVERT, GENERATE, MODEL_LOGITS in a LibTorch
# build), DATA (the build's decompressed tests/data/), GPT2 (the repository's tokenizers/gpt2/),
# PYTHON (with numpy, torch, transformers, tensorboard), MPIEXEC (tests/mpirun.sh),
# LAYOUT_REFERENCES (where the multi-rank cases keep the runs they share) and E2E_SHARED (where the
# cases of the other scripts with cases keep theirs; see run_case).
# Sourcing also sets the golden files, TOKENIZER (the GPT-2 flags) and WORK (a fresh temp folder
# removed on exit). Assertions print what they check and exit 1 on the first failure.
# shellcheck shell=bash disable=SC2034  # the variables set here are used by the scripts

if [[ -z ${MEGATRON_E2E_ENV:-} || ! -r ${MEGATRON_E2E_ENV:-} ]]; then
  echo "usage: MEGATRON_E2E_ENV=<build>/tests/e2e/e2e.env $0 [CASE]" \
    "(the build writes that file; ctest sets the variable)${MEGATRON_E2E_ENV:+; cannot read $MEGATRON_E2E_ENV}" >&2
  exit 2
fi
# shellcheck source=/dev/null
source "$MEGATRON_E2E_ENV"
VOCAB=$GPT2/gpt2-vocab.json
MERGES=$GPT2/gpt2-merges.txt
CORPUS=$DATA/corpus.jsonl
GOLDEN=$DATA/corpus_text_document  # made by Megatron with --append-eod
TOKENIZER=(--tokenizer-type GPT2BPETokenizer --vocab-file "$VOCAB" --merge-file "$MERGES")

for f in "$PREPROCESS" "$MERGE" "$INFO" "$VOCAB" "$MERGES" "$CORPUS" "$GOLDEN.bin" "$GOLDEN.idx"; do
  [[ -e $f ]] || { echo "FAIL: $f does not exist" >&2; exit 1; }
done

# need_tools NAME...: fails clearly when this build lacks a tool the script runs (TRAIN, CONVERT,
# GENERATE, MODEL_LOGITS need LibTorch; MPIEXEC needs MPI).
need_tools() {
  local name
  for name in "$@"; do
    [[ -n ${!name:-} && -e ${!name} ]] || { echo "FAIL: this build has no $name (see $MEGATRON_E2E_ENV)" >&2; exit 1; }
  done
}

# transformers only ever reads local folders here: no waiting on the hub where it is unreachable.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

WORK=$(mktemp -d "${TMPDIR:-/tmp}/megatron-e2e.XXXXXX")
[[ -n ${MEGATRON_E2E_KEEP:-} ]] || trap 'chmod -R u+rwX "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1

IS_ROOT=0
[[ $(id -u) -eq 0 ]] && IS_ROOT=1

# require COMMAND...: fails clearly when a command the script uses (gzip, zstd) is missing.
require() {
  local c
  for c in "$@"; do command -v "$c" >/dev/null || { echo "FAIL: the $c command is needed" >&2; exit 1; }; done
}

step() { echo "== $*"; }
ok() { echo "   ok: $*"; }

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

show() {  # show FILE LABEL: a captured stream, for failure reports
  echo "---- $2 ----" >&2
  cat "$1" >&2
}

# run_capture CMD...: runs CMD with stdout to $WORK/out.txt and stderr to $WORK/err.txt; sets RC.
run_capture() {
  RC=0
  "$@" >"$WORK/out.txt" 2>"$WORK/err.txt" || RC=$?
}

# assert_succeeds CMD...: CMD exits 0 (its output stays in out.txt / err.txt).
assert_succeeds() {
  run_capture "$@"
  if [[ $RC -ne 0 ]]; then
    show "$WORK/out.txt" stdout
    show "$WORK/err.txt" stderr
    fail "expected success, got exit code $RC: $*"
  fi
}

# assert_fails_with SUBSTRING CMD...: CMD exits non-zero and its stderr contains SUBSTRING.
assert_fails_with() {
  local expected=$1
  shift
  run_capture "$@"
  if [[ $RC -eq 0 ]]; then
    show "$WORK/out.txt" stdout
    fail "expected failure, but exit code 0: $*"
  fi
  if ! grep -qF -- "$expected" "$WORK/err.txt"; then
    show "$WORK/err.txt" stderr
    fail "stderr lacks \"$expected\""
  fi
  ok "exit $RC, stderr has: $expected"
}

# assert_contains FILE SUBSTRING
assert_contains() {
  grep -qF -- "$2" "$1" || { show "$1" "$1"; fail "$1 lacks \"$2\""; }
}

# assert_line FILE LINE: FILE has a line equal to LINE.
assert_line() {
  grep -qxF -- "$2" "$1" || { show "$1" "$1"; fail "$1 has no line \"$2\""; }
}

# assert_eq EXPECTED ACTUAL WHAT
assert_eq() {
  [[ "$1" == "$2" ]] || fail "$3: expected '$1', got '$2'"
  ok "$3 = $2"
}

# assert_empty FILE WHAT
assert_empty() {
  [[ ! -s $1 ]] || { show "$1" "$1"; fail "$2: expected nothing"; }
}

# assert_same_dataset PREFIX_A PREFIX_B: the .bin and the .idx files are byte-identical.
assert_same_dataset() {
  cmp "$1.bin" "$2.bin" || fail "$1.bin differs from $2.bin"
  cmp "$1.idx" "$2.idx" || fail "$1.idx differs from $2.idx"
  ok "$1.{bin,idx} identical to $2.{bin,idx}"
}

# assert_no_outputs DIR: DIR holds no file at all: neither a final name nor a *.tmp.* leftover.
assert_no_outputs() {
  local left
  left=$(find "$1" -mindepth 1 -print)
  [[ -z $left ]] || fail "files left in $1: $left"
  ok "nothing written to $1"
}

# fresh_dir NAME: an empty folder $WORK/NAME (removed first if it exists); prints its path.
fresh_dir() {
  rm -rf "${WORK:?}/$1"
  mkdir -p "$WORK/$1"
  echo "$WORK/$1"
}

# hf_job WORDS...: queues one check of tests/e2e/hf_check.py (see its usage) for hf_checks.
hf_job() { echo "$*" >>"$WORK/hf_jobs.txt"; }

# hf_checks: runs the queued checks in one Python process (transformers takes seconds to start),
# printing each result; fails when any failed. The queue is emptied.
hf_checks() {
  local rc=0
  "$PYTHON" "$(dirname "${BASH_SOURCE[0]}")/hf_check.py" "$WORK/hf_jobs.txt" >"$WORK/hf_checks.txt" 2>"$WORK/err.txt" || rc=$?
  sed -n 's/^ok: /   ok: /p' "$WORK/hf_checks.txt"
  rm -f "$WORK/hf_jobs.txt"
  if [[ $rc -ne 0 ]]; then
    grep "^FAIL" "$WORK/hf_checks.txt" >&2
    [[ -s $WORK/err.txt ]] && show "$WORK/err.txt" stderr
    fail "transformers disagrees (above)"
  fi
}

# iteration_values FILE NAME: "iteration value" of NAME's field ("lm loss", "z_loss", "learning
# rate", ...) in each of Megatron's iteration lines of FILE: the one reader of that line here.
iteration_values() {
  sed -n "s/.* iteration *\([0-9]*\)\/ *[0-9]* |.* $2: \([0-9.E+-]*\) |.*/\1 \2/p" "$1"
}
losses() { iteration_values "$1" "lm loss"; }  # losses FILE: "iteration loss" per iteration line

# compare_iterations REF FILE WHAT FIRST LAST TOL NAME...: each NAME field of FILE's iterations
# FIRST..LAST within TOL (relative) of REF's; TOL "same": the same text. Every iteration must be in
# both; prints the worst difference. The one comparer of iteration lines here.
compare_iterations() {
  local ref=$1 got=$2 what=$3 first=$4 last=$5 tol=$6 name
  shift 6
  for name in "$@"; do
    iteration_values "$ref" "$name" >"$WORK/ref_values.txt"
    iteration_values "$got" "$name" >"$WORK/got_values.txt"
    awk -v first="$first" -v last="$last" -v what="$what: $name" -v tol="$tol" '
      NR == FNR { ref[$1] = $2; next }
      { got[$1] = $2 }
      END {
        n = 0; worst = 0
        for (i = first; i <= last; i++) {
          if (!(i in ref) || !(i in got)) { printf "FAIL: %s: iteration %d missing\n", what, i > "/dev/stderr"; exit 1 }
          if (tol == "same") {
            if (ref[i] != got[i]) { printf "FAIL: %s: iteration %d: %s, reference %s\n", what, i, got[i], ref[i] > "/dev/stderr"; exit 1 }
          } else {
            d = ref[i] - got[i]; if (d < 0) d = -d; rel = ref[i] != 0 ? d / (ref[i] < 0 ? -ref[i] : ref[i]) : d
            if (rel > worst) worst = rel
            if (rel > tol) { printf "FAIL: %s: iteration %d: %s, reference %s (relative %.2e)\n", what, i, got[i], ref[i], rel > "/dev/stderr"; exit 1 }
          }
          n++
        }
        if (tol == "same") printf "   ok: %s: %d iterations identical\n", what, n
        else printf "   ok: %s: %d iterations within %s of the reference (worst %.1e)\n", what, n, tol, worst
      }' "$WORK/ref_values.txt" "$WORK/got_values.txt" || { show "$got" "$what output"; exit 1; }
  done
}

# Scripts made of cases, one CTest test each (megatron_add_e2e_cases in tests/e2e/CMakeLists.txt):
# the script lists them in CASES ("name processors [cases it reads from...]"), answers --list
# before sourcing this file, and defines case_<name>; run_case NAME runs one. What later cases read
# (reference logs, checkpoints) a case keeps in $SHARED, the script's folder beside the build;
# CTest runs the cases a case reads from first (as fixtures).
run_case() {
  local name=${1:?"usage: $0 --list | CASE"} entry
  local script
  script=$(basename "$0" .sh)
  for entry in "${CASES[@]}"; do
    if [[ ${entry%% *} == "$name" ]]; then
      SHARED=$E2E_SHARED/$script
      mkdir -p "$SHARED"
      "case_$name"
      echo "PASS"
      return 0
    fi
  done
  fail "unknown case '$name' of $script (one of: $(printf '%s ' "${CASES[@]%% *}"))"
}

# shared NAME: the path of NAME in $SHARED, which an earlier case wrote; fails naming the case to
# run first when it is not there.
shared() {
  [[ -e $SHARED/$1 ]] || fail "$SHARED/$1 is missing: run the case that writes it first (ctest does, as a fixture)"
  echo "$SHARED/$1"
}
