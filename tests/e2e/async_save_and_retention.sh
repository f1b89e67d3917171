#!/usr/bin/env bash
# --async-save and retention with the real binary: megatron_train is
# killed with SIGKILL while an async checkpoint is being written (its iter_XXXXXXX.tmp.<pid>/
# folder is there): the tracker still names the previous checkpoint, which loads, the rerun removes
# the leftover, resumes there and gives the losses of a run never interrupted. --keep-last-checkpoints
# and --save-retain-interval leave exactly the folders they should.
set -uo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
need_tools TRAIN

# About 14M parameters: each checkpoint is ~170 MB, so a write takes long enough to be caught.
RUN=("$TRAIN" --num-layers 2 --hidden-size 256 --num-attention-heads 4 --seq-length 32
     --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --lr 3e-3
     --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 1 --data-path "$GOLDEN"
     --data-cache-path "$WORK/cache" "${TOKENIZER[@]}" --log-interval 1 --eval-interval 1000
     --eval-iters 1 --make-vocab-size-divisible-by 64 --train-iters 200)

# kill_mid_write CKPT LOG: runs with --async-save --save-interval 1 until a temporary checkpoint
# folder is seen after a first checkpoint was committed, then SIGKILLs the process. Returns 0 when the kill landed mid-write (the
# temporary is still there afterwards), 1 when the race was lost.
kill_mid_write() {
  local ckpt=$1 log=$2
  rm -rf "$ckpt"
  "${RUN[@]}" --save "$ckpt" --save-interval 1 --async-save >"$log" 2>&1 &
  local pid=$! waited=0 temp=""
  while [[ -z $temp ]]; do
    kill -0 "$pid" 2>/dev/null || { show "$log" log; fail "the run ended before a save was caught in flight"; }
    (( waited++ < 6000 )) || { kill -9 "$pid"; fail "no async save seen within 60 s"; }
    [[ -f $ckpt/latest_checkpointed_iteration.txt ]] && temp=$(compgen -G "$ckpt/iter_*.tmp.*" | head -1)
    [[ -n $temp ]] || sleep 0.01
  done
  kill -9 "$pid"
  wait "$pid" 2>/dev/null
  [[ -d $temp ]]
}

step "SIGKILL during an async write: the previous checkpoint and the tracker stay"
caught=""
for attempt in 1 2 3 4 5; do
  if kill_mid_write "$WORK/ckpt" "$WORK/killed.txt"; then caught=$attempt; break; fi
done
[[ -n $caught ]] || fail "five runs never had a save in flight at the kill"
temp=$(compgen -G "$WORK/ckpt/iter_*.tmp.*" | head -1)
writing=$((10#$(basename "$temp" | sed -E 's/iter_([0-9]+)\.tmp\..*/\1/')))
[[ -f $WORK/ckpt/latest_checkpointed_iteration.txt ]] || fail "no checkpoint committed before the kill"
tracker=$(cat "$WORK/ckpt/latest_checkpointed_iteration.txt")
(( tracker < writing )) || fail "the tracker names $tracker, the save in flight was of $writing"
[[ -d $WORK/ckpt/$(printf 'iter_%07d' "$tracker") ]] || fail "iteration $tracker's folder is gone"
ok "killed while writing iteration $writing (attempt $caught); the tracker names $tracker"

step "the rerun removes the leftover, resumes at $tracker and matches an uninterrupted run"
end=$((tracker + 3))
assert_succeeds "${RUN[@]}" --load "$WORK/ckpt" --save "$WORK/ckpt" --save-interval 1000 --exit-interval "$end"
grep -q "loading checkpoint from $WORK/ckpt at iteration $tracker" "$WORK/out.txt" ||
  { show "$WORK/out.txt" log; fail "the rerun did not load iteration $tracker"; }
grep -q "$(basename "$temp")" "$WORK/out.txt" || { show "$WORK/out.txt" log; fail "no line about the removed leftover"; }
[[ -e $temp ]] && fail "the leftover $temp is still there"
losses "$WORK/out.txt" >"$WORK/resumed.txt"
assert_succeeds "${RUN[@]}" --exit-interval "$end"
losses "$WORK/out.txt" | tail -n +$((tracker + 1)) >"$WORK/straight.txt"
[[ $(wc -l <"$WORK/resumed.txt") -eq 3 ]] || fail "the rerun printed $(wc -l <"$WORK/resumed.txt") losses, expected 3"
diff "$WORK/straight.txt" "$WORK/resumed.txt" || fail "the resumed losses differ from the uninterrupted run's"
ok "iterations $((tracker + 1))-$end equal the uninterrupted run's"

step "--keep-last-checkpoints 2 --save-retain-interval 4 with --async-save"
assert_succeeds "${RUN[@]}" --save "$WORK/retain" --save-interval 2 --async-save --keep-last-checkpoints 2 \
  --save-retain-interval 4 --exit-interval 11
kept=$(cd "$WORK/retain" && echo iter_*)
[[ $kept == "iter_0000004 iter_0000008 iter_0000010 iter_0000011" ]] || fail "kept: $kept"
[[ $(cat "$WORK/retain/latest_checkpointed_iteration.txt") == 11 ]] || fail "the tracker does not name 11"
[[ $(grep -c "removed checkpoint" "$WORK/out.txt") -eq 2 ]] || { show "$WORK/out.txt" log; fail "expected 2 removals"; }
ok "kept $kept"
