#!/usr/bin/env bash
# Tensor, sequence and data parallelism end to end: megatron_train under
# mpirun at TP2, TP2+SP, TP4+SP, DP2, DP4 and TP2xDP2+SP, with and without the distributed
# optimizer and overlapped gradient reduction, gives every iteration's lm loss within 1e-5
# (relative) of the single-process run with the same global batch, and in bf16 and fp16 within one
# rounding of the loss of the single-process run in that precision; a TP2xDP2 run with the
# distributed optimizer resumes exactly, and resumes at another DP size and at TP1 (resharded);
# an error on one rank is printed with its rank and ends the job; a rank killed with SIGKILL ends
# the job with a message naming it, and one killed in the middle of a save leaves the previous
# checkpoint loadable and the tracker untouched.
# Called with lib.sh's six arguments (megatron_train's path last), then MPIEXEC.
set -uo pipefail
MPIEXEC=${7:?"usage: $0 <lib.sh's six arguments> MPIEXEC"}
set -- "${@:1:6}"
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=mpi_lib.sh
source "$(dirname "$0")/mpi_lib.sh"

ITERS=20
# A small GPT on the golden dataset, no dropout (dropout masks differ between layouts by design).
# The vocabulary is padded to a multiple of 512 in every layout (--make-vocab-size-divisible-by
# is multiplied by TP), so every layout has the same 50688-row embedding.
base() {  # base TP: the common flags for tensor-parallel size TP
  echo --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 \
    --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --lr 3e-3 --min-lr 1e-4 \
    --lr-decay-style cosine --lr-warmup-iters 2 --clip-grad 1.0 --weight-decay 0.1 \
    --attention-dropout 0 --hidden-dropout 0 --data-path "$GOLDEN" --data-cache-path "$WORK/cache" \
    --vocab-file "$VOCAB" --merge-file "$MERGES" --tokenizer-type GPT2BPETokenizer --log-interval 1 \
    --eval-interval 1000 --eval-iters 1 --make-vocab-size-divisible-by $((512 / $1)) --train-iters $ITERS \
    --tensor-model-parallel-size "$1"
}

step "single-process reference run"
# shellcheck disable=SC2046
assert_succeeds "$TRAIN" $(base 1)
cp "$WORK/out.txt" "$WORK/ref1.txt"
[[ $(losses "$WORK/ref1.txt" | wc -l) -eq $ITERS ]] || { show "$WORK/ref1.txt" stdout; fail "expected $ITERS iteration lines"; }
ok "$ITERS iterations"

run_layout() {  # run_layout NAME NP TP EXTRA...: trains and compares with the reference
  local name=$1 np=$2 tp=$3
  shift 3
  step "$name: mpirun -n $np, TP $tp $*"
  # shellcheck disable=SC2046
  assert_succeeds mpi "$np" $(base "$tp") "$@"
  cp "$WORK/out.txt" "$WORK/$name.txt"
  compare_losses "$WORK/ref1.txt" "$WORK/$name.txt" "$name"
}

run_layout tp2 2 2
assert_line "$WORK/tp2.txt" "using world size: 2, data-parallel size: 1, context-parallel size: 1, hierarchical context-parallel sizes: None, tensor-model-parallel size: 2, pipeline-model-parallel size: 1"
[[ $(grep -c ' iteration *1/' "$WORK/tp2.txt") -eq 1 ]] || fail "tp2: the iteration line must come from one rank only"
run_layout tp2_sp 2 2 --sequence-parallel
run_layout tp4_sp 4 4 --sequence-parallel
run_layout dp2 2 1
run_layout dp4 4 1
run_layout dp4_distopt_overlap 4 1 --use-distributed-optimizer --overlap-grad-reduce --ddp-bucket-size 20000
run_layout tp2_dp2_sp 4 2 --sequence-parallel
run_layout tp2_dp2_sp_distopt_overlap 4 2 --sequence-parallel --use-distributed-optimizer --overlap-grad-reduce \
  --ddp-bucket-size 20000

# Mixed precision in the layout of the guides (TP2 x DP2, SP, distributed optimizer, overlap)
# against the single process in the same precision. Splitting the matrices over TP rounds partial
# sums to bf16/fp16 in other places, so layouts agree to one rounding of the loss in the format
# (2^-9 relative for bf16, 2^-12 for fp16; measured: 5e-5 for bf16) rather than to 1e-5.
for precision in bf16 fp16; do
  flags=(--"$precision")
  [[ $precision == fp16 ]] && flags+=(--initial-loss-scale 1024)
  tol=$([[ $precision == bf16 ]] && echo 1.953125e-3 || echo 2.44140625e-4)
  step "$precision: single process, then TP2 x DP2 with SP, the distributed optimizer and overlap"
  # shellcheck disable=SC2046
  assert_succeeds "$TRAIN" $(base 1) "${flags[@]}"
  assert_contains "$WORK/out.txt" "in torch.$([[ $precision == bf16 ]] && echo bfloat16 || echo float16)"
  cp "$WORK/out.txt" "$WORK/ref_$precision.txt"
  # shellcheck disable=SC2046
  assert_succeeds mpi 4 $(base 2) "${flags[@]}" --sequence-parallel --use-distributed-optimizer --overlap-grad-reduce \
    --ddp-bucket-size 20000
  compare_losses "$WORK/ref_$precision.txt" "$WORK/out.txt" "$precision TP2 x DP2" 1 "$tol"
done

step "resume at TP2 x DP2 with the distributed optimizer equals the uninterrupted run"
ckpt="$WORK/ckpt"
RESUME=(--sequence-parallel --use-distributed-optimizer --overlap-grad-reduce --ddp-bucket-size 20000)
# shellcheck disable=SC2046
assert_succeeds mpi 4 $(base 2) "${RESUME[@]}" --save "$ckpt" --save-interval 10 --exit-interval 10
for f in mp_rank_00/model.safetensors mp_rank_01/model.safetensors mp_rank_00/distrib_optim.dp_rank_000.safetensors \
  mp_rank_00/distrib_optim.dp_rank_001.safetensors mp_rank_01/distrib_optim.dp_rank_001.safetensors mp_rank_01/meta.json; do
  [[ -s $ckpt/iter_0000010/$f ]] || { ls -R "$ckpt" >&2; fail "iter_0000010/$f missing"; }
done
assert_eq 10 "$(cat "$ckpt/latest_checkpointed_iteration.txt")" "tracker"
# shellcheck disable=SC2046
assert_succeeds mpi 4 $(base 2) "${RESUME[@]}" --load "$ckpt"
losses "$WORK/out.txt" >"$WORK/resumed.txt"
losses "$WORK/tp2_dp2_sp_distopt_overlap.txt" | awk '$1 > 10' >"$WORK/straight.txt"
cmp -s "$WORK/resumed.txt" "$WORK/straight.txt" ||
  { diff "$WORK/straight.txt" "$WORK/resumed.txt" >&2; fail "the resumed run's losses differ from the uninterrupted run's"; }
ok "iterations 11-$ITERS identical to the uninterrupted run"

step "the same checkpoint resumes at TP2 x DP1 (the optimizer shards re-split)"
# shellcheck disable=SC2046
assert_succeeds mpi 2 $(base 2) "${RESUME[@]}" --load "$ckpt"
compare_losses "$WORK/tp2_dp2_sp_distopt_overlap.txt" "$WORK/out.txt" "resumed at DP1" 11

step "another TP size reshards the checkpoint (distributed optimizer state included)"
# shellcheck disable=SC2046
assert_succeeds "$TRAIN" $(base 1) --load "$ckpt"
assert_contains "$WORK/out.txt" "resharding checkpoint $ckpt/iter_0000010 from tensor-model-parallel size 2 x pipeline-model-parallel size 1"
compare_losses "$WORK/ref1.txt" "$WORK/out.txt" "resumed at TP1" 11

step "an error on one rank is printed with its rank and ends every rank"
cp -r "$ckpt" "$WORK/broken"
printf 'x' | dd of="$WORK/broken/iter_0000010/mp_rank_01/model.safetensors" bs=1 seek=200 conv=notrunc status=none
# shellcheck disable=SC2046
assert_fails_with "[rank 1] checkpoint file $WORK/broken/iter_0000010/mp_rank_01/model.safetensors fails its CRC-32 check" \
  timeout 60 "$MPIEXEC" -n 2 --oversubscribe --bind-to none "$TRAIN" $(base 2) --load "$WORK/broken"
[[ $RC -ne 124 ]] || fail "the job did not end within 60 s"

step "a rank killed with SIGKILL ends the job, naming it"
# shellcheck disable=SC2046
mpi 2 $(base 1) --train-iters 100000 >"$WORK/kill_out.txt" 2>"$WORK/kill_err.txt" &
job=$!
for _ in $(seq 600); do
  grep -q ' iteration *3/' "$WORK/kill_out.txt" 2>/dev/null && break
  sleep 0.1
done
grep -q ' iteration *3/' "$WORK/kill_out.txt" || { kill -9 $job; show "$WORK/kill_err.txt" stderr; fail "training did not start"; }
victim=$(rank_pid "$WORK/cache" 1)
[[ -n $victim ]] || { kill -9 $job; fail "could not find rank 1's process"; }
start=$SECONDS
kill -9 "$victim"
rc=0
wait $job || rc=$?
elapsed=$((SECONDS - start))
[[ $rc -ne 0 ]] || fail "the job exited 0 after a rank was killed"
[[ $elapsed -le 60 ]] || fail "the job took $elapsed s to end after a rank was killed"
grep -qE "rank 1 .*(signal 9|Killed)" "$WORK/kill_err.txt" "$WORK/kill_out.txt" ||
  { show "$WORK/kill_err.txt" stderr; fail "no message names the killed rank 1"; }
ok "exit $rc after ${elapsed} s; $(grep -hE 'rank 1 .*(signal 9|Killed)' "$WORK/kill_err.txt" "$WORK/kill_out.txt" | head -1)"

step "a rank killed in the middle of a save leaves the previous checkpoint and the tracker"
# A larger model, so that a save takes long enough to be caught in the middle: rank 1 is killed
# as soon as the iteration's temporary folder appears.
big="$WORK/big"
# shellcheck disable=SC2046
assert_succeeds mpi 2 $(base 2) --hidden-size 512 --num-attention-heads 8 --save "$big" --save-interval 2 \
  --exit-interval 2
assert_eq 2 "$(cat "$big/latest_checkpointed_iteration.txt")" "tracker before the killed save"
# shellcheck disable=SC2046
mpi 2 $(base 2) --hidden-size 512 --num-attention-heads 8 --save "$big" --load "$big" --save-interval 4 \
  --exit-interval 4 >"$WORK/save_kill_out.txt" 2>"$WORK/save_kill_err.txt" &
job=$!
victim=""
for _ in $(seq 6000); do
  if compgen -G "$big/iter_0000004.tmp.*" >/dev/null; then
    victim=$(rank_pid "--save $big --load" 1)
    [[ -n $victim ]] && kill -9 "$victim"
    break
  fi
  sleep 0.005
done
rc=0
wait $job || rc=$?
[[ -n $victim ]] || { show "$WORK/save_kill_err.txt" stderr; fail "the save of iteration 4 was not seen starting"; }
[[ $rc -ne 0 ]] || fail "the job exited 0 after rank 1 was killed during the save"
assert_eq 2 "$(cat "$big/latest_checkpointed_iteration.txt")" "tracker after the killed save"
[[ ! -e $big/iter_0000004 ]] || fail "iter_0000004 exists although rank 1 was killed during its save"
ok "exit $rc; tracker still 2, no iter_0000004"
# shellcheck disable=SC2046
assert_succeeds mpi 2 $(base 2) --hidden-size 512 --num-attention-heads 8 --save "$big" --load "$big" \
  --save-interval 4 --exit-interval 4
grep -q "successfully loaded checkpoint from $big .* at iteration 2" "$WORK/out.txt" ||
  { show "$WORK/out.txt" stdout; fail "the next run did not resume from iteration 2"; }
compgen -G "$big/iter_*.tmp.*" >/dev/null && fail "the killed save's temporary folder is still there"
assert_eq 4 "$(cat "$big/latest_checkpointed_iteration.txt")" "tracker after the next run"
ok "the next run resumed from iteration 2, removed the leftover and saved iteration 4"

echo "PASS"
