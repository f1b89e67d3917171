#!/usr/bin/env bash
# The cluster workflow on a live Slurm: a throw-away slurmctld with two fake
# nodes runs the repository's sbatch scripts as a user would.
#   1. slurm/1.data-preprocessing.sbatch over 3 shards (.jsonl, .jsonl.gz, .jsonl.zst), one per
#      array task, then the merge job: the bytes equal the dataset Megatron made from the corpus.
#      The merge job run again (as a retry would) is a no-op and leaves the dataset as it was.
#   2. slurm/2.distributed-training.sbatch on 2 nodes x 2 CPU tasks, TP2 x DP2, on that dataset.
#      Two one-node runs that end at their own length (EXTRA_ARGS --train-iters 6, and
#      --train-samples 40) complete without a requeue.
#   3. scontrol requeue mid-run: SIGTERM, a checkpoint, the rerun (restart 1, output appended)
#      finishes with the uninterrupted run's losses, iteration for iteration.
#   4. a time limit: --signal=TERM before it, the ranks save, the script requeues the job.
# and, between 2 and 3, both scripts with TOKENIZER_TYPE / TOKENIZER_MODEL (a HuggingFace folder).
# The paths come from the build's e2e.env, as for the e2e scripts (see tests/e2e/lib.sh):
#   MEGATRON_E2E_ENV=build/tests/e2e/e2e.env bash tests/slurm/slurm_workflow.sh
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
if [[ -z ${MEGATRON_E2E_ENV:-} || ! -r ${MEGATRON_E2E_ENV:-} ]]; then
  echo "usage: MEGATRON_E2E_ENV=<build>/tests/e2e/e2e.env $0 (the build writes that file; ctest sets the variable)" >&2
  exit 2
fi
# shellcheck source=/dev/null
source "$MEGATRON_E2E_ENV"
[[ -n ${TRAIN:-} && -x $TRAIN ]] || { echo "FAIL: this build has no megatron_train (see $MEGATRON_E2E_ENV)" >&2; exit 1; }
TOOLS=$(dirname "$(realpath "$TRAIN")")
DATA=$(realpath "$DATA")
# shellcheck source=cluster.sh
source "$HERE/cluster.sh"

for c in slurmctld slurmd sbatch srun scontrol zstd gzip; do
  command -v "$c" >/dev/null || [[ -x /usr/sbin/$c ]] || { echo "FAIL: $c is needed (scripts/setup.sh installs Slurm)" >&2; exit 1; }
done
WORK=$(mktemp -d "${TMPDIR:-/tmp}/megatron-slurm.XXXXXX")
cleanup() {
  slurm_stop
  if [[ ${KEEP_WORK:-0} == 1 ]]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
cd "$WORK" || exit 1

step() { echo "== $* ($(date +%T))"; }
ok() { echo "   ok: $*"; }
fail() {
  echo "FAIL: $*" >&2
  local f
  for f in "$WORK"/*.out "$WORK"/data/*.out; do
    [[ -f $f ]] || continue
    echo "---- $f: its start lines, errors and last lines ----" >&2
    grep -nE '^\[20|error|Error|ERROR|signal|Killed|Bus|Segmentation|srun:|slurmstepd' "$f" | head -n 40 >&2
    tail -n 15 "$f" >&2
  done
  for f in "$WORK"/cluster/log/*.log; do
    [[ -f $f ]] && { echo "---- $f: errors ----" >&2; grep -iE 'error|fail' "$f" | tail -n 15 >&2; }
  done
  exit 1
}
# losses FILE: "iteration loss" for each iteration line, the last one printed for each iteration.
losses() { sed -nE 's/.*iteration +([0-9]+)\/ +[0-9]+ \|.*lm loss: ([^ ]+) \|.*/\1 \2/p' "$1" | sort -n -k1,1 -s | awk '{l[$1]=$2} END {for (i in l) print i, l[i]}' | sort -n; }
wait_for_line() {  # wait_for_line FILE REGEX SECONDS
  local waited=0
  until grep -qE "$2" "$1" 2>/dev/null; do
    (( waited++ < $3 * 10 )) || fail "no line matching '$2' in $1 after $3 s"
    sleep 0.1
  done
}

step "start a Slurm with two fake nodes"
slurm_start "$WORK/cluster" || fail "Slurm did not start"
sinfo
ok "slurmctld and slurmd n1, n2 are up"

step "1. preprocessing: 3 shards as a job array of 3 tasks, then the merge job"
mkdir -p shards
total=$(wc -l <"$DATA/corpus.jsonl")
third=$(((total + 2) / 3))
split -l "$third" -d -a 1 "$DATA/corpus.jsonl" shards/shard_
mv shards/shard_0 shards/shard_0.jsonl
gzip -c shards/shard_1 >shards/shard_1.jsonl.gz && rm shards/shard_1
zstd -q shards/shard_2 -o shards/shard_2.jsonl.zst && rm shards/shard_2
plan=$(INPUT="$WORK/shards" DATA_PATH="$WORK/data" OUTPUT_PREFIX="$WORK/data/corpus" FILES_PER_TASK=1 WORKERS=2 \
  MEGATRON_BIN="$TOOLS" sbatch --parsable --cpus-per-task=2 --output="$WORK/plan.out" "$REPO/slurm/1.data-preprocessing.sbatch")
slurm_wait "$plan" 60 || fail "the planning job did not finish"
[[ $(slurm_state "$plan") == COMPLETED ]] || fail "the planning job ended $(slurm_state "$plan")"
read -r array merge < <(sed -nE 's/^ARRAY_JOB=([0-9]+) MERGE_JOB=([0-9]+)$/\1 \2/p' "$WORK/plan.out")
[[ -n $array && -n $merge ]] || fail "plan.out names no array and merge job"
slurm_wait "$array" 120 || fail "the array did not finish"
slurm_wait "$merge" 60 || fail "the merge job did not finish"
for t in 0 1 2; do
  [[ $(scontrol show job "${array}_$t" | sed -nE 's/.*JobState=([A-Z_]+).*/\1/p' | head -1) == COMPLETED ]] ||
    fail "array task $t did not complete"
done
[[ $(slurm_state "$merge") == COMPLETED ]] || fail "the merge job ended $(slurm_state "$merge")"
cmp "$WORK/data/corpus_text_document.bin" "$DATA/corpus_text_document.bin" || fail ".bin differs from Megatron's"
cmp "$WORK/data/corpus_text_document.idx" "$DATA/corpus_text_document.idx" || fail ".idx differs from Megatron's"
[[ ! -e $WORK/data/corpus.parts ]] || fail "the parts were not removed after the merge"
ok "array $array (3 tasks) + merge $merge: .bin and .idx byte-equal to Megatron's dataset of the whole corpus"

step "1b. the merge job again, as a retry after a node failure would run it: a no-op"
again=$(PHASE=merge INPUT="$WORK/shards" DATA_PATH="$WORK/data" OUTPUT_PREFIX="$WORK/data/corpus" FILES_PER_TASK=1 \
  MEGATRON_BIN="$TOOLS" sbatch --parsable --job-name=preprocess-data-merge --cpus-per-task=1 --output="$WORK/merge_again.out" \
  "$REPO/slurm/1.data-preprocessing.sbatch")
slurm_wait "$again" 60 || fail "the second merge job did not finish"
[[ $(slurm_state "$again") == COMPLETED ]] || fail "the second merge job ended $(slurm_state "$again")"
grep -q "already merged" "$WORK/merge_again.out" || fail "the second merge job does not say the dataset is merged"
cmp "$WORK/data/corpus_text_document.bin" "$DATA/corpus_text_document.bin" || fail ".bin changed by the second merge"
cmp "$WORK/data/corpus_text_document.idx" "$DATA/corpus_text_document.idx" || fail ".idx changed by the second merge"
ok "merge job $again: completed, the dataset unchanged"

# A tiny GPT at TP2 x DP2 on 2 nodes x 2 CPU tasks.
export GPUS_PER_NODE=0 TASKS_PER_NODE=2 NUM_LAYERS=2 HIDDEN_SIZE=32 NUM_ATTENTION_HEADS=4 SEQ_LENGTH=32 \
  TENSOR_MODEL_PARALLEL_SIZE=2 PIPELINE_MODEL_PARALLEL_SIZE=1 MICRO_BATCH_SIZE=2 GLOBAL_BATCH_SIZE=8 \
  NUMBER_OF_ITERATIONS=30 LR=3e-3 LR_DECAY_ITERS=30 PRECISION=fp32 DATA_PATH="$WORK/data/corpus_text_document" \
  SAVE_INTERVAL=1000 EVAL_INTERVAL=1000 EVAL_ITERS=1 LOG_INTERVAL=1 MEGATRON_BIN="$TOOLS" \
  EXTRA_ARGS="--make-vocab-size-divisible-by 64 --data-cache-path $WORK/cache --use-distributed-optimizer"

step "2. training: 2 nodes x 2 tasks, TP2 x DP2, 30 iterations"
job=$(CHECKPOINT_PATH="$WORK/straight" sbatch --parsable --nodes=2 --output="$WORK/straight.out" \
  "$REPO/slurm/2.distributed-training.sbatch")
slurm_wait "$job" 150 || fail "the training job did not finish"
[[ $(slurm_state "$job") == COMPLETED ]] || fail "the training job ended $(slurm_state "$job")"
grep -q "using world size: 4, data-parallel size: 2, context-parallel size: 1, hierarchical context-parallel sizes: None, tensor-model-parallel size: 2" \
  "$WORK/straight.out" || fail "no world-size line for TP2 x DP2"
losses "$WORK/straight.out" >straight.txt
[[ $(wc -l <straight.txt) -eq 30 ]] || fail "expected 30 loss lines, got $(wc -l <straight.txt)"
[[ $(cat "$WORK/straight/latest_checkpointed_iteration.txt") == 30 ]] || fail "no final checkpoint"
for f in command.sh environment.txt git_revision.txt; do
  [[ -s $WORK/straight/runs/${job}_restart0/$f ]] || fail "the run record has no $f"
done
compgen -G "$WORK/straight/tensorboard/events.out.tfevents.*" >/dev/null || fail "no TensorBoard event file"
for r in 0 1 2 3; do
  # Ranks 1 and 2 print nothing when all goes well (Megatron's print_rank_0 / print_rank_last).
  [[ -f $(printf '%s/straight/logs/%s_restart0_rank%05d.log' "$WORK" "$job" "$r") ]] || fail "no log file of rank $r"
done
grep -q "^------------------------ arguments ------------------------$" "$WORK/straight/logs/${job}_restart0_rank00000.log" ||
  fail "rank 0's log has no argument dump"
[[ $(losses "$WORK/straight/logs/${job}_restart0_rank00003.log" | wc -l) -eq 30 ]] || fail "the last rank's log lacks iteration lines"
ok "job $job: 30 iterations, a checkpoint, the run record, one log per rank and event files beside it"

step "2b. runs that end at their own length (EXTRA_ARGS --train-iters 6; --train-samples 40): no requeue"
# One node each (TP2 on its 2 tasks), side by side, each with its own index cache.
short=$(CHECKPOINT_PATH="$WORK/short" EXTRA_ARGS="${EXTRA_ARGS/"$WORK/cache"/"$WORK/cache_short"} --train-iters 6" \
  sbatch --parsable --nodes=1 --output="$WORK/short.out" "$REPO/slurm/2.distributed-training.sbatch")
samples=$(CHECKPOINT_PATH="$WORK/samples" EXTRA_ARGS="${EXTRA_ARGS/"$WORK/cache"/"$WORK/cache_samples"} --train-samples 40" \
  sbatch --parsable --nodes=1 --output="$WORK/samples.out" "$REPO/slurm/2.distributed-training.sbatch")
# A requeued job would be queued again: it never leaves the queue.
slurm_wait "$short" 90 || fail "the --train-iters 6 job did not finish (requeued?)"
slurm_wait "$samples" 90 || fail "the --train-samples 40 job did not finish (requeued?)"
for run in "short $short 6" "samples $samples 5"; do
  read -r name id last <<<"$run"
  [[ $(slurm_state "$id") == COMPLETED ]] || fail "the $name job ended $(slurm_state "$id")"
  [[ $(scontrol show job "$id") == *" Restarts=0 "* ]] || fail "the $name job was requeued"
  ! grep -q "requeueing job" "$WORK/$name.out" || fail "the $name job requeued itself"
  grep -q "not requeueing: the run reached its last iteration, $last" "$WORK/$name.out" ||
    fail "the $name job does not say that its run reached iteration $last"
  [[ $(cat "$WORK/$name/latest_checkpointed_iteration.txt") == "$last" ]] || fail "no checkpoint of iteration $last in $name"
done
ok "jobs $short (6 iterations) and $samples (40 samples: 5 iterations): completed, not requeued"

step "2c. another tokenizer (TOKENIZER_TYPE=HuggingFaceTokenizer TOKENIZER_MODEL=<Llama-3 test folder>): both scripts"
LLAMA3="$(dirname "$DATA")/unit/hf_reference/llama3"
[[ -f $LLAMA3/tokenizer.json ]] || fail "no $LLAMA3/tokenizer.json (the fixture hf_tokenizer_reference makes it)"
pre=$(INPUT="$WORK/shards/shard_0.jsonl" DATA_PATH="$WORK/data" OUTPUT_PREFIX="$WORK/data/llama3" WORKERS=2 \
  TOKENIZER_TYPE=HuggingFaceTokenizer TOKENIZER_MODEL="$LLAMA3" MEGATRON_BIN="$TOOLS" \
  sbatch --parsable --cpus-per-task=2 --output="$WORK/llama3_pre.out" "$REPO/slurm/1.data-preprocessing.sbatch")
slurm_wait "$pre" 60 || fail "the preprocessing job did not finish"
[[ $(slurm_state "$pre") == COMPLETED ]] || fail "the preprocessing job ended $(slurm_state "$pre")"
"$PREPROCESS" --input "$WORK/shards/shard_0.jsonl" --output-prefix "$WORK/direct" --workers 1 --append-eod \
  --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$LLAMA3" >/dev/null || fail "preprocess_data failed"
cmp "$WORK/data/llama3_text_document.bin" "$WORK/direct_text_document.bin" || fail "the job's .bin differs"
job=$(CHECKPOINT_PATH="$WORK/llama3" DATA_PATH="$WORK/data/llama3_text_document" NUMBER_OF_ITERATIONS=3 EVAL_ITERS=0 \
  TOKENIZER_TYPE=HuggingFaceTokenizer TOKENIZER_MODEL="$LLAMA3" \
  EXTRA_ARGS="${EXTRA_ARGS/"$WORK/cache"/"$WORK/cache_llama3"}" \
  sbatch --parsable --nodes=1 --output="$WORK/llama3.out" "$REPO/slurm/2.distributed-training.sbatch")
slurm_wait "$job" 90 || fail "the training job did not finish"
[[ $(slurm_state "$job") == COMPLETED ]] || fail "the training job ended $(slurm_state "$job")"
grep -q "> building HuggingFaceTokenizer tokenizer ..." "$WORK/llama3.out" || fail "not trained with the HF tokenizer"
[[ $(losses "$WORK/llama3.out" | wc -l) -eq 3 ]] || fail "expected 3 loss lines"
[[ -f $WORK/llama3/iter_0000003/tokenizer/tokenizer.json ]] || fail "the checkpoint carries no tokenizer.json"
ok "job $pre wrote preprocess_data's bytes, job $job trained 3 iterations with the tokenizer"

step "3. scontrol requeue mid-run: SIGTERM, a checkpoint, the rerun resumes"
job=$(CHECKPOINT_PATH="$WORK/requeued" sbatch --parsable --nodes=2 --output="$WORK/requeued.out" \
  "$REPO/slurm/2.distributed-training.sbatch")
wait_for_line "$WORK/requeued.out" "iteration +5/" 90
scontrol requeue "$job" || fail "scontrol requeue $job refused"
wait_for_line "$WORK/requeued.out" "exiting program after receiving SIGTERM" 30
# A requeued job may start again once its old credentials have expired (cred_expire, 10 s in
# the test cluster, 120 s by default); starting it earlier (scontrol update StartTime=now) fails
# with "Job credential revoked". It starts by itself.
slurm_wait "$job" 150 || fail "the requeued job did not finish"
[[ $(slurm_state "$job") == COMPLETED ]] || fail "the requeued job ended $(slurm_state "$job")"
grep -q "megatron-gpt job $job (restart 1)" "$WORK/requeued.out" || fail "no restart-1 header in the appended output"
grep -q "exiting program after receiving SIGTERM" "$WORK/requeued/logs/${job}_restart0_rank00000.log" ||
  fail "rank 0's log of the first run lacks its last line"
[[ -s $WORK/requeued/logs/${job}_restart1_rank00003.log ]] || fail "no per-rank log of the rerun"
stopped=$(sed -nE 's/.*saving checkpoint at iteration +([0-9]+) .*/\1/p' "$WORK/requeued.out" | head -1)
(( stopped >= 5 && stopped < 30 )) || fail "the first run saved at iteration '$stopped'"
grep -q "loading checkpoint from $WORK/requeued at iteration $stopped" "$WORK/requeued.out" ||
  fail "the rerun did not load iteration $stopped"
losses "$WORK/requeued.out" >requeued.txt
diff straight.txt requeued.txt || fail "the requeued run's losses differ from the uninterrupted run's"
ok "stopped and saved at iteration $stopped, resumed there; all 30 losses equal the uninterrupted run's"

step "4. a time limit: the signal before it, a checkpoint, the job requeues itself"
job=$(CHECKPOINT_PATH="$WORK/limited" NUMBER_OF_ITERATIONS=100000 LR_DECAY_ITERS=100000 sbatch --parsable --nodes=2 \
  --time=1 --signal=TERM@50 --output="$WORK/limited.out" "$REPO/slurm/2.distributed-training.sbatch")
wait_for_line "$WORK/limited.out" "exiting program after receiving SIGTERM" 90
wait_for_line "$WORK/limited.out" "requeueing job $job to continue from iteration" 30
saved=$(cat "$WORK/limited/latest_checkpointed_iteration.txt")
(( saved > 0 )) || fail "no checkpoint before the time limit"
scancel "$job"
ok "saved at iteration $saved before the limit, then requeued"
