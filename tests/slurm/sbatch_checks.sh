#!/usr/bin/env bash
# The sbatch scripts' own decisions, without a Slurm or a build: each script runs under bash with
# the SLURM_* variables sbatch sets, and stand-ins on PATH for scontrol (it fails, or names the
# submitted file), sbatch (it must not be called) and srun (it runs the command as one task, and
# returns once everything writing the task's output has closed it, as a step's I/O does). The
# tools are stand-ins too: megatron_train prints the argument dump's iteration lines and how it
# stopped, merge_datasets concatenates the parts of its folder.
#   1. 2.distributed-training requeues only a run that stopped early by a signal or
#      --exit-duration-in-mins before its own last iteration (EXTRA_ARGS --train-iters or
#      --train-samples win over NUMBER_OF_ITERATIONS); --train-samples replaces --train-iters.
#   2. 1.data-preprocessing's merge phase run again after success, after a partial first run, on
#      an incomplete set of parts, after a cut-short removal, with KEEP_PARTS=1.
#   3. A failing scontrol: the scripts go on with their own path (and say so when that is Slurm's
#      copy of the script, outside the repository).
#   4. Numeric variables: a clear error naming the variable, not bash's own.
#   5. CONFIG naming a folder, or nothing.
#   bash tests/slurm/sbatch_checks.sh       (KEEP_WORK=1 keeps its folder)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PRE=$REPO/slurm/1.data-preprocessing.sbatch
TRAIN=$REPO/slurm/2.distributed-training.sbatch
WORK=$(mktemp -d "${TMPDIR:-/tmp}/megatron-sbatch-checks.XXXXXX")
cleanup() { if [[ ${KEEP_WORK:-0} == 1 ]]; then echo "kept $WORK"; else rm -rf "$WORK"; fi; }
trap cleanup EXIT
FAILED=0

# The stand-ins.
mkdir -p "$WORK/bin" "$WORK/tools"
cat >"$WORK/bin/scontrol" <<'EOF'
#!/bin/bash
echo "scontrol $*" >>"$CALLS"
case $1 in
  show)
    [[ -n ${FAKE_COMMAND:-} ]] || { echo "slurm_load_jobs error: Unable to contact slurm controller (connect failure)" >&2; exit 1; }
    echo "JobId=$4 JobName=test UserId=root(0) Command=$FAKE_COMMAND WorkDir=/tmp" ;;
  requeue) ;;
  *) exit 1 ;;
esac
EOF
cat >"$WORK/bin/sbatch" <<'EOF'
#!/bin/bash
echo "sbatch $*" >>"$CALLS"
echo "sbatch: not in these checks" >&2
exit 1
EOF
cat >"$WORK/bin/srun" <<'EOF'
#!/bin/bash
# srun [--flag...] COMMAND...: COMMAND as task 0; returns when its output is closed.
echo "srun $*" >>"$CALLS"
[[ -z ${FAKE_NO_TASK:-} ]] || exit 0  # a step that ran nothing, wrote no log
while [[ ${1:-} == --* ]]; do shift; done
export SLURM_PROCID=0 SLURM_LOCALID=0
"$@" 2>&1 | cat
exit "${PIPESTATUS[0]}"
EOF
cat >"$WORK/tools/megatron_train" <<'EOF'
#!/bin/bash
# FAKE_STOP: empty (runs to its last iteration), signal:N, minutes:N or interval:N (stops after
# iteration N), late:N (a signal stop whose line reaches rank 0's log 2 s after the exit, as a
# slow tee might write it); FAKE_RC: its exit status.
iters="" samples="" gbs="" save=""
while (( $# )); do
  case $1 in
    --train-iters) iters=$2; shift ;;
    --train-iters=*) iters=${1#*=} ;;
    --train-samples) samples=$2; shift ;;
    --train-samples=*) samples=${1#*=} ;;
    --global-batch-size) gbs=$2; shift ;;
    --save) save=$2; shift ;;
  esac
  shift
done
if [[ -n $iters && -n $samples ]]; then
  echo "megatron_train: error: invalid command line: --train-iters and --train-samples cannot be used together" >&2
  exit 1
fi
echo "------------------------ arguments ------------------------"
echo "  global_batch_size ............................... $gbs"
echo "  train_iters ..................................... ${iters:-None}"
echo "  train_samples ................................... ${samples:-None}"
echo "-------------------- end of arguments ---------------------"
last=${iters:-$((samples / gbs))}
case ${FAKE_STOP:-} in
  "") at=$last ;;
  signal:*) at=${FAKE_STOP#*:} what="exiting program after receiving SIGTERM." ;;
  minutes:*) at=${FAKE_STOP#*:} what="exiting program after 1.5 minutes" ;;
  interval:*) at=${FAKE_STOP#*:} what="exiting program at iteration $at" ;;
  late:*) at=${FAKE_STOP#*:} ;;
esac
echo "saving checkpoint at iteration $at to $save in megatron-cpp format"
echo "$at" >"$save/latest_checkpointed_iteration.txt"
if [[ $FAKE_STOP == late:* ]]; then
  (sleep 2; echo "[exiting program after receiving SIGTERM.] datetime: 2026-01-01 00:00:00.000000 " \
     >>"$save/logs/7_restart0_rank00000.log") </dev/null >/dev/null 2>&1 &
fi
[[ -n ${what:-} ]] && echo "[$what] datetime: 2026-01-01 00:00:00.000000 "
exit "${FAKE_RC:-0}"
EOF
cat >"$WORK/tools/merge_datasets" <<'EOF'
#!/bin/bash
# merge_datasets --input DIR --output-prefix P: P.bin/.idx, the folder's parts concatenated.
echo "merge_datasets $*" >>"$CALLS"
cat "$2"/*.bin >"$4.bin" && cat "$2"/*.idx >"$4.idx"
EOF
chmod +x "$WORK"/bin/* "$WORK"/tools/*
export PATH=$WORK/bin:$PATH CALLS=$WORK/calls.txt

# run NAME SCRIPT [VAR=value...]: runs SCRIPT as a batch job would, in a clean environment but for
# the variables given; its output in $WORK/NAME.out, its status in RC, the stand-ins' calls in
# $WORK/NAME.calls.
run() {
  local name=$1 script=$2
  shift 2
  : >"$CALLS"
  (cd "$WORK" && env -i PATH="$PATH" HOME="$WORK" CALLS="$CALLS" SLURM_JOB_ID=7 SLURM_JOB_NAME=checks \
    SLURM_SUBMIT_DIR="$WORK" SLURM_JOB_NUM_NODES=1 SLURM_JOB_NODELIST=n1 SLURM_CPUS_PER_TASK=1 \
    FAKE_COMMAND="$script" "$@" bash "$script") >"$WORK/$name.out" 2>&1
  RC=$?
  cp "$CALLS" "$WORK/$name.calls"
}
check() {  # CONDITION; check WHAT: one result line, from the status of the command before
  local status=$? what=$1
  if (( status == 0 )); then
    echo "   ok: $what"
  else
    echo "FAIL: $what" >&2
    sed 's/^/      | /' "$WORK/$LAST.out" | tail -n 25 >&2
    FAILED=1
  fi
}
has() { grep -qF -- "$1" "$WORK/$LAST.out"; }
called() { grep -qF -- "$1" "$WORK/$LAST.calls"; }
# expect_error NAME SCRIPT MESSAGE [VAR=value...]: the script stops with status 1 and MESSAGE.
expect_error() {
  local name=$1 script=$2 message=$3
  shift 3
  LAST=$name
  run "$name" "$script" "$@"
  (( RC == 1 )) && has "error: $message" && ! grep -q "line [0-9]*:" "$WORK/$name.out"
  check "$name: '$message'"
}
step() { echo "== $*"; }

mkdir -p "$WORK/shards"
for i in 0 1 2; do echo '{"text": "a"}' >"$WORK/shards/s$i.jsonl"; done
train_env=(GPUS_PER_NODE=0 TASKS_PER_NODE=1 TENSOR_MODEL_PARALLEL_SIZE=1 PIPELINE_MODEL_PARALLEL_SIZE=1
           GLOBAL_BATCH_SIZE=8 NUMBER_OF_ITERATIONS=30 MEGATRON_BIN="$WORK/tools")

step "1. training: requeue only a run stopped early, before its own last iteration"
# requeue_case NAME yes|no EXTRA_ARGS FAKE_STOP [FAKE_RC]
requeue_case() {
  local name=$1 want=$2 extra=$3 stop=$4 rc=${5:-0}
  LAST=$name
  run "$name" "$TRAIN" "${train_env[@]}" CHECKPOINT_PATH="$WORK/$name" EXTRA_ARGS="--mock-data $extra" \
    FAKE_STOP="$stop" FAKE_RC="$rc" FAKE_NO_TASK="${FAKE_NO_TASK:-}"
  if [[ $want == yes ]]; then
    (( RC == rc )) && called "scontrol requeue 7" && has "requeueing job 7"
    check "$name: exits $rc and requeues"
  else
    (( RC == rc )) && ! called "scontrol requeue" && ! has "requeueing job"
    check "$name: exits $rc, no requeue"
  fi
}
requeue_case own_train_iters no "--train-iters 6" ""
has "not requeueing: the run reached its last iteration, 6"
check "own_train_iters: says the run reached iteration 6"
requeue_case signalled yes "" signal:5
has "the latest checkpoint is of iteration 5 of 30"
check "signalled: the checkpoint is of iteration 5 of 30"
requeue_case signalled_own_iters yes "--train-iters 10 --train-iters=20" signal:12
requeue_case signalled_at_the_end no "--train-iters 6" signal:6
has "not requeueing: the run reached its last iteration, 6"
check "signalled_at_the_end: says the run reached iteration 6"
requeue_case exit_duration yes "" minutes:9
requeue_case exit_interval no "" interval:10
has "not requeueing: the run stopped as asked ([exiting program at iteration 10])"
check "exit_interval: says why"
requeue_case failed no "" signal:5 1
requeue_case late_line yes "" late:5
FAKE_NO_TASK=1 requeue_case no_log no "" ""
has "not requeueing: no $WORK/no_log/logs/7_restart0_rank00000.log to tell how the run ended"
check "no_log: says why"
requeue_case train_samples no "--train-samples 48" ""
! grep -qE -- "--train-iters|--lr-decay-iters" "$WORK/train_samples.calls" && has "of iteration 6 of 6"
check "train_samples: no --train-iters or --lr-decay-iters beside --train-samples"
requeue_case train_samples_signalled yes "--train-samples=80" signal:4
has "the latest checkpoint is of iteration 4 of 10"
check "train_samples_signalled: the last iteration is 80 / 8"

step "2. preprocessing: the merge job run again"
P=$WORK/data/corpus.parts
merge_env=(PHASE=merge INPUT="$WORK/shards" DATA_PATH="$WORK/data" OUTPUT_PREFIX="$WORK/data/corpus"
           FILES_PER_TASK=1 MEGATRON_BIN="$WORK/tools")
# parts: the array's outputs of 3 tasks, in a fresh PARTS; expected.bin/.idx what they merge into.
parts() {
  rm -rf "$WORK/data" && mkdir -p "$P"
  printf '%s\n' "$WORK"/shards/*.jsonl >"$P/shards.txt"
  local t
  for t in 0 1 2; do
    echo "bin $t" >"$(printf '%s/part_%06d_text_document.bin' "$P" "$t")"
    echo "idx $t" >"$(printf '%s/part_%06d_text_document.idx' "$P" "$t")"
  done
  printf 'bin %s\n' 0 1 2 >"$WORK/expected.bin"
  printf 'idx %s\n' 0 1 2 >"$WORK/expected.idx"
}
merged_right() { cmp -s "$WORK/data/corpus_text_document.bin" "$WORK/expected.bin" && cmp -s "$WORK/data/corpus_text_document.idx" "$WORK/expected.idx"; }
merge() { LAST=$1; run "$1" "$PRE" "${merge_env[@]}" "${@:2}"; }
parts
merge merge_first
(( RC == 0 )) && merged_right && [[ ! -e $P && ! -e $P.removing ]]
check "merge_first: merged, parts removed"
merge merge_again
(( RC == 0 )) && merged_right && ! called merge_datasets && has "already merged"
check "merge_again (after success, parts gone): a no-op"
parts
# The first run moves the .bin parts, then the .idx ones: it died in between.
mkdir -p "$P/text" && mv "$P"/part_*_text_document.bin "$P"/part_000000_text_document.idx "$P/text/"
merge merge_partial
(( RC == 0 )) && merged_right && [[ ! -e $P ]]
check "merge_partial (the first run died while moving the parts): finishes"
parts
rm "$P/part_000001_text_document.idx"
echo "an older dataset" >"$WORK/data/corpus_text_document.bin"
merge merge_incomplete
(( RC == 1 )) && has "has 3 .bin and 2 .idx parts, expected 3 of each" && [[ $(cat "$WORK/data/corpus_text_document.bin") == "an older dataset" ]]
check "merge_incomplete (a part missing): refuses, the output untouched"
parts
merge merge_kept KEEP_PARTS=1
merge merge_kept_again KEEP_PARTS=1
(( RC == 0 )) && merged_right && ! called merge_datasets && [[ -f $P/text/part_000002_text_document.bin ]]
check "merge_kept_again (KEEP_PARTS=1, after success): a no-op"
mv "$P" "$P.removing" && rm "$P.removing/shards.txt"
merge merge_cut_removal
(( RC == 0 )) && merged_right && [[ ! -e $P && ! -e $P.removing ]]
check "merge_cut_removal (the removal was cut short): finishes it"
rm -f "$WORK/data/corpus_text_document.idx"
merge merge_nothing
(( RC == 1 )) && has "no parts in $P"
check "merge_nothing (no parts, no dataset): says so"

step "3. a failing scontrol: the scripts fall back to their own path"
expect_error no_scontrol_pre "$PRE" "set INPUT to a jsonl file" FAKE_COMMAND=
expect_error no_scontrol_train "$TRAIN" "set DATA_PATH" FAKE_COMMAND= "${train_env[@]}"
mkdir -p "$WORK/spool"
cp "$TRAIN" "$WORK/spool/slurm_script"
expect_error spool_copy "$WORK/spool/slurm_script" "$WORK/spool/slurm_script is not in a checkout" FAKE_COMMAND=
LAST=spool_copy_scontrol
run spool_copy_scontrol "$WORK/spool/slurm_script" FAKE_COMMAND="$TRAIN" "${train_env[@]}"
(( RC == 1 )) && has "error: set DATA_PATH"
check "spool_copy_scontrol: scontrol's Command= finds the repository"

step "4. numeric variables"
pre_env=(INPUT="$WORK/shards" DATA_PATH="$WORK/data" MEGATRON_BIN="$WORK/tools")
expect_error files_per_task_0 "$PRE" "FILES_PER_TASK=0: expected a positive integer" "${pre_env[@]}" FILES_PER_TASK=0
expect_error files_per_task_abc "$PRE" "FILES_PER_TASK=abc: expected a positive integer" "${pre_env[@]}" FILES_PER_TASK=abc
expect_error max_parallel "$PRE" "MAX_PARALLEL_TASKS=-2: expected a positive integer" "${pre_env[@]}" FILES_PER_TASK=1 MAX_PARALLEL_TASKS=-2
expect_error workers "$PRE" "WORKERS=4x: expected a positive integer" "${pre_env[@]}" WORKERS=4x
expect_error keep_parts "$PRE" "KEEP_PARTS=yes: expected 0 or 1" "${pre_env[@]}" KEEP_PARTS=yes
expect_error gpus_per_node "$TRAIN" "GPUS_PER_NODE=abc: expected a non-negative integer" "${train_env[@]}" GPUS_PER_NODE=abc
expect_error tp_0 "$TRAIN" "TENSOR_MODEL_PARALLEL_SIZE=0: expected a positive integer" "${train_env[@]}" TENSOR_MODEL_PARALLEL_SIZE=0
expect_error iterations "$TRAIN" "NUMBER_OF_ITERATIONS=1e5: expected a positive integer" "${train_env[@]}" NUMBER_OF_ITERATIONS=1e5
expect_error octal "$TRAIN" "SEQ_LENGTH=010: expected a positive integer" "${train_env[@]}" SEQ_LENGTH=010
expect_error cpu_ranks_ok "$TRAIN" "set DATA_PATH" "${train_env[@]}" GPUS_PER_NODE=0 EVAL_ITERS=0

step "5. CONFIG"
expect_error config_folder "$TRAIN" "CONFIG=$REPO/examples/gpt3 is a folder" "${train_env[@]}" CONFIG="$REPO/examples/gpt3"
expect_error config_missing "$TRAIN" "CONFIG=$WORK/none.env: no such file" "${train_env[@]}" CONFIG="$WORK/none.env"

if (( FAILED )); then echo "FAIL: see above" >&2; exit 1; fi
echo "all sbatch checks passed"
