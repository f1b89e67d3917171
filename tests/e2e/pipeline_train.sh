#!/usr/bin/env bash
# Pipeline parallelism end to end: megatron_train under mpirun at PP2, PP4, PP2 with two
# virtual stages, PP4 with uneven first and last stages, TP2xPP2, and TP2xPP2xDP2 with virtual
# stages, sequence parallelism, the distributed optimizer and overlap (8 ranks) gives every
# iteration's lm loss within 1e-5 (relative) of the single-process run; TP2xPP2 resumes exactly,
# and its checkpoint resumes at TP1xPP1, TP4xPP1, TP1xPP4 and PP2 with virtual stages (model and
# optimizer resharded on --load) with the single-process losses;
# Megatron's pipeline flag checks are reported together; a stage that never sends ends the job
# within the timeout, naming the stage and the transfer.
# Called with lib.sh's six arguments (megatron_train's path last), then MPIEXEC.
set -uo pipefail
MPIEXEC=${7:?"usage: $0 <lib.sh's six arguments> MPIEXEC"}
set -- "${@:1:6}"
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=mpi_lib.sh
source "$(dirname "$0")/mpi_lib.sh"

ITERS=20
# A small GPT on the golden dataset without dropout; the padded vocabulary is 50688 rows in every
# layout (--make-vocab-size-divisible-by x TP = 512). Global batch 8 of micro-batches of 2: 4
# micro-batches per iteration at DP 1, 2 at DP 2.
base() {  # base TP LAYERS: the common flags
  echo --num-layers "$2" --hidden-size 64 --num-attention-heads 4 --seq-length 32 \
    --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --lr 3e-3 --min-lr 1e-4 \
    --lr-decay-style cosine --lr-warmup-iters 2 --clip-grad 1.0 --weight-decay 0.1 \
    --attention-dropout 0 --hidden-dropout 0 --data-path "$GOLDEN" --data-cache-path "$WORK/cache" \
    --vocab-file "$VOCAB" --merge-file "$MERGES" --tokenizer-type GPT2BPETokenizer --log-interval 1 \
    --eval-interval 10 --eval-iters 1 --make-vocab-size-divisible-by $((512 / $1)) --train-iters $ITERS \
    --tensor-model-parallel-size "$1"
}

for layers in 4 6; do
  step "single-process reference run, $layers layers"
  # shellcheck disable=SC2046
  assert_succeeds "$TRAIN" $(base 1 "$layers")
  cp "$WORK/out.txt" "$WORK/ref$layers.txt"
  [[ $(losses "$WORK/ref$layers.txt" | wc -l) -eq $ITERS ]] || { show "$WORK/out.txt" stdout; fail "expected $ITERS iteration lines"; }
  ok "$ITERS iterations"
done

run_layout() {  # run_layout NAME NP TP LAYERS EXTRA...: trains and compares with the reference
  local name=$1 np=$2 tp=$3 layers=$4
  shift 4
  step "$name: mpirun -n $np, TP $tp, $layers layers, $*"
  # shellcheck disable=SC2046
  assert_succeeds mpi "$np" $(base "$tp" "$layers") "$@"
  cp "$WORK/out.txt" "$WORK/$name.txt"
  compare_losses "$WORK/ref$layers.txt" "$WORK/$name.txt" "$name"
  # The validation lines come from the last stage, once each, with the single process's values.
  [[ $(grep -c 'validation loss at iteration 10 |' "$WORK/$name.txt") -eq 1 ]] ||
    { show "$WORK/$name.txt" stdout; fail "$name: expected one validation line at iteration 10"; }
  paste <(sed -n 's/.*lm loss value: \([0-9.E+-]*\) .*/\1/p' "$WORK/ref$layers.txt") \
    <(sed -n 's/.*lm loss value: \([0-9.E+-]*\) .*/\1/p' "$WORK/$name.txt") |
    awk -v what="$name" '{ n++; d = $1 - $2; if (d < 0) d = -d; if ($1 == "" || $2 == "" || d / $1 > 1e-5) { printf "FAIL: %s: validation loss %s, single process %s\n", what, $2, $1 > "/dev/stderr"; exit 1 } }
      END { if (n < 3) { printf "FAIL: %s: %d validation lines, expected at least 3\n", what, n > "/dev/stderr"; exit 1 } }' ||
    { show "$WORK/$name.txt" stdout; exit 1; }
}

run_layout pp2 2 1 4 --pipeline-model-parallel-size 2
assert_line "$WORK/pp2.txt" "using world size: 2, data-parallel size: 1, context-parallel size: 1, hierarchical context-parallel sizes: None, tensor-model-parallel size: 1, pipeline-model-parallel size: 2"
run_layout pp4 4 1 4 --pipeline-model-parallel-size 4
run_layout pp2_virtual2 2 1 4 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1
assert_line "$WORK/pp2_virtual2.txt" "Number of virtual stages per pipeline stage: 2"
run_layout pp4_uneven 4 1 6 --pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 1 \
  --decoder-last-pipeline-num-layers 1
run_layout tp2_pp2 4 2 4 --pipeline-model-parallel-size 2
run_layout tp2_pp2_dp2_virtual_sp_distopt 8 2 4 --pipeline-model-parallel-size 2 \
  --num-layers-per-virtual-pipeline-stage 1 --sequence-parallel --use-distributed-optimizer --overlap-grad-reduce

# Mixed precision through the pipeline (activations and their gradients travel in bf16 / fp16,
# the loss scale multiplies the last stage's loss): TP2 x PP2 with virtual stages against the
# single process in the same precision, within one rounding of the loss in the format (see
# parallel_train.sh).
for precision in bf16 fp16; do
  flags=(--"$precision")
  [[ $precision == fp16 ]] && flags+=(--initial-loss-scale 1024)
  tol=$([[ $precision == bf16 ]] && echo 1.953125e-3 || echo 2.44140625e-4)
  step "$precision: single process, then TP2 x PP2 with virtual stages and the distributed optimizer"
  # shellcheck disable=SC2046
  assert_succeeds "$TRAIN" $(base 1 4) "${flags[@]}"
  cp "$WORK/out.txt" "$WORK/ref_$precision.txt"
  # shellcheck disable=SC2046
  assert_succeeds mpi 4 $(base 2 4) "${flags[@]}" --pipeline-model-parallel-size 2 \
    --num-layers-per-virtual-pipeline-stage 1 --use-distributed-optimizer
  compare_losses "$WORK/ref_$precision.txt" "$WORK/out.txt" "$precision TP2 x PP2 (virtual)" 1 "$tol"
done

step "resume at TP2 x PP2 equals the uninterrupted run"
ckpt="$WORK/ckpt"
# shellcheck disable=SC2046
assert_succeeds mpi 4 $(base 2 4) --pipeline-model-parallel-size 2 --save "$ckpt" --save-interval 10 --exit-interval 10
for shard in mp_rank_00_000 mp_rank_01_000 mp_rank_00_001 mp_rank_01_001; do
  [[ -s $ckpt/iter_0000010/$shard/model.safetensors ]] || { ls -R "$ckpt" >&2; fail "iter_0000010/$shard missing"; }
done
# shellcheck disable=SC2046
assert_succeeds mpi 4 $(base 2 4) --pipeline-model-parallel-size 2 --load "$ckpt"
losses "$WORK/out.txt" >"$WORK/resumed.txt"
losses "$WORK/tp2_pp2.txt" | awk '$1 > 10' >"$WORK/straight.txt"
cmp -s "$WORK/resumed.txt" "$WORK/straight.txt" ||
  { diff "$WORK/straight.txt" "$WORK/resumed.txt" >&2; fail "the resumed run's losses differ from the uninterrupted run's"; }
ok "iterations 11-$ITERS identical to the uninterrupted run"

step "the TP2 x PP2 checkpoint reshards on --load: TP1 x PP1, TP4 x PP1, TP1 x PP4, PP2 with virtual stages"
reshard() {  # reshard NAME NP TP EXTRA...: resumes the TP2 x PP2 checkpoint and compares iterations 11-20
  local name=$1 np=$2 tp=$3
  shift 3
  # shellcheck disable=SC2046
  assert_succeeds mpi "$np" $(base "$tp" 4) --load "$ckpt" "$@"
  assert_contains "$WORK/out.txt" "resharding checkpoint $ckpt/iter_0000010 from tensor-model-parallel size 2 x pipeline-model-parallel size 2"
  cp "$WORK/out.txt" "$WORK/$name.txt"
  compare_losses "$WORK/ref4.txt" "$WORK/$name.txt" "$name (model and optimizer resharded)" 11
}
reshard resharded_tp1_pp1 1 1
reshard resharded_tp4_pp1 4 4
reshard resharded_tp1_pp4 4 1 --pipeline-model-parallel-size 4
reshard resharded_pp2_virtual2 2 1 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1

step "pipeline flag problems are reported together before any work"
# shellcheck disable=SC2046
assert_fails_with "number of layers per pipeline stage (2) must be divisible by --num-layers-per-virtual-pipeline-stage (3)" \
  "$TRAIN" $(base 1 4) --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 3
assert_contains "$WORK/err.txt" "world size (1) is not divisible by tensor x pipeline x context parallel sizes (2)"
# shellcheck disable=SC2046
assert_fails_with "--num-layers (6) minus the first and last stages' layers (3) must split evenly over the other 2 pipeline stages" \
  "$TRAIN" $(base 1 6) --pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 2 \
  --decoder-last-pipeline-num-layers 1

# shellcheck disable=SC2046
assert_fails_with "--num-layers-per-virtual-pipeline-stage assumes an even split" \
  "$TRAIN" $(base 1 6) --pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 1 \
  --num-layers-per-virtual-pipeline-stage 1

step "a stage that never sends ends the job within the timeout, naming the stage and the transfer"
# Stage 1 is told the global batch is 16 (8 micro-batches), stage 0 sends only 4.
start=$SECONDS
# shellcheck disable=SC2046
"$MPIEXEC" --oversubscribe --bind-to none -n 1 "$TRAIN" $(base 1 4) --pipeline-model-parallel-size 2 \
  --distributed-timeout-minutes 1 : -n 1 "$TRAIN" $(base 1 4) --pipeline-model-parallel-size 2 \
  --distributed-timeout-minutes 1 --global-batch-size 16 >"$WORK/hang_out.txt" 2>"$WORK/hang_err.txt"
rc=$?
elapsed=$((SECONDS - start))
[[ $rc -ne 0 ]] || fail "the job exited 0"
[[ $elapsed -le 150 ]] || fail "the job took $elapsed s to end (timeout 1 minute)"
grep -qE "did not complete within 1 minute \(--distributed-timeout-minutes\)" "$WORK/hang_err.txt" ||
  { show "$WORK/hang_err.txt" stderr; fail "no timeout message"; }
grep -qE "pipeline stage 1 of 2 waiting for the activation of micro-batch 4|rank 0\] all_reduce on the embedding group" \
  "$WORK/hang_err.txt" || { show "$WORK/hang_err.txt" stderr; fail "the message names neither the waiting stage nor the operation"; }
ok "exit $rc after $elapsed s: $(grep -m1 'did not complete' "$WORK/hang_err.txt" | cut -c1-220)"

echo "PASS"
