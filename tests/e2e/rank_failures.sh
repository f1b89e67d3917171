#!/usr/bin/env bash
# One rank failing ends the whole job, naming it, and never costs a checkpoint:
#   error_on_one_rank        an error on one rank (a damaged checkpoint shard) is printed with its
#                            rank and ends every rank within a minute
#   rank_killed              a rank killed with SIGKILL ends the job, with a message naming it
#   rank_killed_during_save  a rank killed in the middle of a save leaves the previous checkpoint
#                            and the tracker; the next run resumes there and clears the leftover
#   stage_never_sends        a pipeline stage that stops (SIGSTOP: alive but silent) ends the job
#                            within --distributed-timeout-minutes, naming the waiting stage and transfer
#   ranks_disagree           ranks started with different flags (a model size, a learning rate)
#                            stop before anything is built, naming the ranks and the flags
# Usage: rank_failures.sh CASE (or --list).
set -uo pipefail
CASES=(error_on_one_rank rank_killed rank_killed_during_save stage_never_sends ranks_disagree)
if [[ ${1:-} == --list ]]; then
  printf '%s\n' "${CASES[@]}"
  exit 0
fi
CASE=${1:?"usage: $0 --list|CASE"}
[[ " ${CASES[*]} " == *" $CASE "* ]] || { echo "$0: unknown case '$CASE' (one of: ${CASES[*]})" >&2; exit 2; }
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=mpi_lib.sh
source "$(dirname "$0")/mpi_lib.sh"

error_on_one_rank() {
  local ckpt=$WORK/ckpt
  # shellcheck disable=SC2046
  assert_succeeds mpi 2 $(layout_flags 2 2) --train-iters 4 --save "$ckpt" --save-interval 4
  printf 'x' | dd of="$ckpt/iter_0000004/mp_rank_01/model.safetensors" bs=1 seek=200 conv=notrunc status=none
  # shellcheck disable=SC2046
  assert_fails_with "[rank 1] checkpoint file $ckpt/iter_0000004/mp_rank_01/model.safetensors fails its CRC-32 check" \
    timeout 60 "$MPIEXEC" -n 2 --oversubscribe --bind-to none "$TRAIN" $(layout_flags 2 2) --load "$ckpt"
  [[ $RC -ne 124 ]] || fail "the job did not end within 60 s"
}

ranks_disagree() {
  local flags
  # shellcheck disable=SC2207
  flags=($(layout_flags 1 2))
  # Open MPI's MPMD form: rank 0 runs the first command line, rank 1 the second.
  assert_fails_with "the ranks were started with different flags" timeout 60 "$MPIEXEC" --oversubscribe --bind-to none \
    -n 1 "$TRAIN" "${flags[@]}" --hidden-size 64 : -n 1 "$TRAIN" "${flags[@]}" --hidden-size 48
  assert_contains "$WORK/err.txt" "rank 1: --hidden-size 48 (rank 0: 64)"
  assert_fails_with "rank 1: --lr 0.001 (rank 0: 0.003)" timeout 60 "$MPIEXEC" --oversubscribe --bind-to none \
    -n 1 "$TRAIN" "${flags[@]}" : -n 1 "$TRAIN" "${flags[@]}" --lr 1e-3
  grep -q " iteration " "$WORK/out.txt" && fail "a rank started training"
  ok "no iteration ran"
}

# await_iteration_3 OUT ERR JOB: waits up to 60 s for iteration 3 in OUT; else kills JOB and fails.
await_iteration_3() {
  for _ in $(seq 600); do
    grep -q ' iteration *3/' "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  kill -9 "$3"
  show "$2" stderr
  fail "training did not start"
}

rank_killed() {
  # shellcheck disable=SC2046
  mpi 2 $(layout_flags 1 2) --train-iters 100000 >"$WORK/kill_out.txt" 2>"$WORK/kill_err.txt" &
  local job=$! victim rc=0 start elapsed
  await_iteration_3 "$WORK/kill_out.txt" "$WORK/kill_err.txt" $job
  victim=$(rank_pid "$WORK/cache" 1)
  [[ -n $victim ]] || { kill -9 $job; fail "could not find rank 1's process"; }
  start=$SECONDS
  kill -9 "$victim"
  wait $job || rc=$?
  elapsed=$((SECONDS - start))
  [[ $rc -ne 0 ]] || fail "the job exited 0 after a rank was killed"
  [[ $elapsed -le 60 ]] || fail "the job took $elapsed s to end after a rank was killed"
  grep -qE "rank 1 .*(signal 9|Killed)" "$WORK/kill_err.txt" "$WORK/kill_out.txt" ||
    { show "$WORK/kill_err.txt" stderr; fail "no message names the killed rank 1"; }
  ok "exit $rc after ${elapsed} s; $(grep -hE 'rank 1 .*(signal 9|Killed)' "$WORK/kill_err.txt" "$WORK/kill_out.txt" | head -1)"
}

rank_killed_during_save() {
  # A larger model, so that a save takes long enough to be caught in the middle: rank 1 is killed
  # as soon as the iteration's temporary folder appears.
  local big=$WORK/big victim="" rc=0
  local flags
  flags="$(layout_flags 2 2) --hidden-size 512 --num-attention-heads 8 --save $big"
  # shellcheck disable=SC2086
  assert_succeeds mpi 2 $flags --save-interval 2 --exit-interval 2
  assert_eq 2 "$(cat "$big/latest_checkpointed_iteration.txt")" "tracker before the killed save"
  # shellcheck disable=SC2086
  mpi 2 $flags --load "$big" --save-interval 4 --exit-interval 4 >"$WORK/save_kill_out.txt" 2>"$WORK/save_kill_err.txt" &
  local job=$!
  for _ in $(seq 6000); do
    if compgen -G "$big/iter_0000004.tmp.*" >/dev/null; then
      victim=$(rank_pid "--save $big --load" 1)
      [[ -n $victim ]] && kill -9 "$victim"
      break
    fi
    sleep 0.005
  done
  wait $job || rc=$?
  [[ -n $victim ]] || { show "$WORK/save_kill_err.txt" stderr; fail "the save of iteration 4 was not seen starting"; }
  [[ $rc -ne 0 ]] || fail "the job exited 0 after rank 1 was killed during the save"
  assert_eq 2 "$(cat "$big/latest_checkpointed_iteration.txt")" "tracker after the killed save"
  [[ ! -e $big/iter_0000004 ]] || fail "iter_0000004 exists although rank 1 was killed during its save"
  ok "exit $rc; tracker still 2, no iter_0000004"
  # shellcheck disable=SC2086
  assert_succeeds mpi 2 $flags --load "$big" --save-interval 4 --exit-interval 4
  grep -q "successfully loaded checkpoint from $big .* at iteration 2" "$WORK/out.txt" ||
    { show "$WORK/out.txt" stdout; fail "the next run did not resume from iteration 2"; }
  compgen -G "$big/iter_*.tmp.*" >/dev/null && fail "the killed save's temporary folder is still there"
  assert_eq 4 "$(cat "$big/latest_checkpointed_iteration.txt")" "tracker after the next run"
  ok "the next run resumed from iteration 2, removed the leftover and saved iteration 4"
}

stage_never_sends() {
  # Stage 0 is stopped (SIGSTOP: alive, silent) once training runs; stage 1 waits for it.
  local start rc=0 elapsed victim
  # shellcheck disable=SC2046
  mpi 2 $(layout_flags 1 4) --pipeline-model-parallel-size 2 --distributed-timeout-minutes 1 --train-iters 100000 \
    >"$WORK/hang_out.txt" 2>"$WORK/hang_err.txt" &
  local job=$!
  await_iteration_3 "$WORK/hang_out.txt" "$WORK/hang_err.txt" $job
  victim=$(rank_pid "$WORK/cache" 0)
  [[ -n $victim ]] || { kill -9 $job; fail "could not find rank 0's process"; }
  start=$SECONDS
  kill -STOP "$victim"
  wait $job || rc=$?
  kill -9 "$victim" 2>/dev/null
  elapsed=$((SECONDS - start))
  [[ $rc -ne 0 ]] || fail "the job exited 0"
  [[ $elapsed -le 150 ]] || fail "the job took $elapsed s to end (timeout 1 minute)"
  grep -qE "did not complete within 1 minute \(--distributed-timeout-minutes\)" "$WORK/hang_err.txt" ||
    { show "$WORK/hang_err.txt" stderr; fail "no timeout message"; }
  # Stage 1 is stuck receiving from stage 0 or sending to it (an exchange waits for both), or in a
  # collective of the step (the gradient norm, the loss), which names itself.
  grep -qE "pipeline stage 1 of 2 (waiting for|sending) the (activation|gradient) of micro-batch [0-9]+, chunk 0 (from|to) stage 0\]|rank 1\] [a-z_]+ on the [a-z-]+ group" \
    "$WORK/hang_err.txt" || { show "$WORK/hang_err.txt" stderr; fail "the message names neither the waiting stage nor the operation"; }
  ok "exit $rc after $elapsed s: $(grep -m1 'did not complete' "$WORK/hang_err.txt" | cut -c1-220)"
}

step "$CASE"
"$CASE"
echo "PASS"
