#!/usr/bin/env bash
# --exit-signal-handler with real signals: SIGTERM to a running megatron_train
# (what Slurm sends on scancel, requeue and the time limit) lets it finish the iteration, save,
# print Megatron's exit line and exit 0; the rerun resumes there and ends with the uninterrupted
# run's losses. Without the handler SIGTERM still kills it, leaving no temporary behind.
# --exit-duration-in-mins stops the same way, under libfaketime's fast clock.
set -uo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
need_tools TRAIN

RUN=("$TRAIN" --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32
     --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --lr 3e-3
     --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 1 --data-path "$GOLDEN"
     --data-cache-path "$WORK/cache" "${TOKENIZER[@]}" --log-interval 1 --eval-interval 1000
     --eval-iters 1 --make-vocab-size-divisible-by 64 --train-iters 400)


# start_and_signal SIGNAL LOG ARGS...: starts the run in the background, waits for its third
# iteration line, sends SIGNAL and waits; sets RC.
start_and_signal() {
  local signal=$1 log=$2
  shift 2
  "${RUN[@]}" "$@" >"$log" 2>&1 &
  local pid=$! waited=0
  until grep -q "iteration        3/" "$log"; do
    kill -0 "$pid" 2>/dev/null || { show "$log" log; fail "the run ended before iteration 3"; }
    (( waited++ < 600 )) || { kill -9 "$pid"; fail "no iteration 3 within 60 s"; }
    sleep 0.1
  done
  kill -s "$signal" "$pid"
  RC=0
  wait "$pid" || RC=$?
}

step "SIGTERM with --exit-signal-handler: the iteration ends, a checkpoint is saved, exit 0"
start_and_signal TERM "$WORK/first.txt" --save "$WORK/ckpt" --save-interval 1000 --exit-signal-handler
[[ $RC -eq 0 ]] || { show "$WORK/first.txt" log; fail "exit code $RC after SIGTERM, expected 0"; }
grep -qE '^\[exiting program after receiving SIGTERM\.\] datetime: [0-9-]+ [0-9:.]+ $' "$WORK/first.txt" ||
  { show "$WORK/first.txt" log; fail "no Megatron exit line"; }
stopped=$(cat "$WORK/ckpt/latest_checkpointed_iteration.txt")
last=$(losses "$WORK/first.txt" | tail -1 | cut -d' ' -f1)
[[ $stopped == "$last" && $stopped -ge 3 && $stopped -lt 400 ]] ||
  fail "the checkpoint is of iteration $stopped, the last logged iteration is $last"
compgen -G "$WORK/ckpt/*.tmp.*" >/dev/null && fail "a temporary was left in ckpt/"
ok "stopped and saved at iteration $stopped"

# The same --train-iters everywhere (it sizes the dataset and the LR schedule); --exit-interval ends.
step "the rerun resumes at $stopped and gives the uninterrupted run's losses"
assert_succeeds "${RUN[@]}" --exit-interval $((stopped + 3)) --load "$WORK/ckpt" --save "$WORK/ckpt" --save-interval 1000
losses "$WORK/first.txt" >"$WORK/interrupted.txt"
losses "$WORK/out.txt" >>"$WORK/interrupted.txt"
assert_succeeds "${RUN[@]}" --exit-interval $((stopped + 3))
losses "$WORK/out.txt" >"$WORK/straight.txt"
[[ $(wc -l <"$WORK/straight.txt") -eq $((stopped + 3)) ]] || fail "the straight run printed $(wc -l <"$WORK/straight.txt") losses"
diff "$WORK/straight.txt" "$WORK/interrupted.txt" || fail "the interrupted and resumed run differs from the straight run"
ok "$((stopped + 3)) iterations, every loss equal"

step "--exit-signal SIGUSR1: SIGUSR1 stops it the same way"
start_and_signal USR1 "$WORK/usr1.txt" --save "$WORK/ckpt_usr1" --save-interval 1000 --exit-signal-handler \
  --exit-signal SIGUSR1
[[ $RC -eq 0 ]] || { show "$WORK/usr1.txt" log; fail "exit code $RC after SIGUSR1"; }
grep -q '^\[exiting program after receiving SIGUSR1\.\] datetime: ' "$WORK/usr1.txt" || fail "no exit line for SIGUSR1"
[[ -s $WORK/ckpt_usr1/latest_checkpointed_iteration.txt ]] || fail "no checkpoint after SIGUSR1"
ok "saved and exited 0"

step "without the handler SIGTERM ends the run at once, non-zero, nothing half-written"
start_and_signal TERM "$WORK/plain.txt" --save "$WORK/ckpt_plain" --save-interval 1
[[ $RC -eq 143 ]] || fail "exit code $RC, expected 143 (killed by SIGTERM)"
compgen -G "$WORK/ckpt_plain/*.tmp.*" >/dev/null && fail "a temporary was left in ckpt_plain/"
ok "killed by the signal (143), no temporary left"

# --exit-duration-in-mins takes whole minutes (an int in Megatron, 0 = off), so the clock runs
# 120 times fast under libfaketime: one training minute is half a second.
step "--exit-duration-in-mins 1: saves and exits 0 once a minute has passed"
command -v faketime >/dev/null || fail "faketime is not installed (scripts/setup.sh installs it)"
RC=0
faketime -f "+0 x120" "${RUN[@]}" --exit-duration-in-mins 1 --save "$WORK/ckpt_time" --save-interval 1000 \
  >"$WORK/time.txt" 2>&1 || RC=$?
[[ $RC -eq 0 ]] || { show "$WORK/time.txt" log; fail "exit code $RC, expected 0"; }
# The minutes are at least the limit; how far past it depends on the machine's load (an iteration
# of a busy machine is minutes of this fast clock).
minutes=$(sed -nE 's/^\[exiting program after ([0-9]+\.[0-9]+) minutes\] datetime: [0-9-]+ [0-9:.]+ $/\1/p' "$WORK/time.txt")
[[ -n $minutes ]] && awk -v m="$minutes" 'BEGIN { exit !(m >= 1) }' ||
  { show "$WORK/time.txt" log; fail "no Megatron exit line for the duration (at least 1 minute)"; }
stopped=$(cat "$WORK/ckpt_time/latest_checkpointed_iteration.txt")
last=$(losses "$WORK/time.txt" | tail -1 | cut -d' ' -f1)
[[ $stopped == "$last" && $stopped -ge 1 && $stopped -lt 400 ]] ||
  fail "the checkpoint is of iteration $stopped, the last logged iteration is $last"
ok "stopped after a (fast) minute and saved at iteration $stopped"
