#!/usr/bin/env bash
# A resume goes on with the run the checkpoint holds, or stops and says what differs: a changed
# learning-rate schedule is refused unless --use-checkpoint-opt-param-scheduler (the checkpoint's
# schedule goes on) or --override-opt-param-scheduler (this command line's) says which wins, as in
# Megatron; a checkpoint saved without its random-number state is refused unless --no-load-rng or
# --finetune; a --save folder holding another run's checkpoints is named at the start and, once
# the new run has a checkpoint of its own, emptied of them (none stays beside its tracker); it is
# refused when its model differs.
set -uo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
need_tools TRAIN

RUN=("$TRAIN" --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32
     --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --min-lr 1e-4
     --lr-decay-style linear --lr-warmup-iters 1 --mock-data --tokenizer-type NullTokenizer --vocab-size 128
     --log-interval 1 --eval-interval 100 --eval-iters 1 --train-iters 8)

# lrs FILE: "iteration learning-rate" per iteration line.
lrs() { iteration_values "$1" "learning rate"; }

step "the straight run, and the same run stopped at iteration 4"
assert_succeeds "${RUN[@]}" --lr 3e-3
lrs "$WORK/out.txt" >"$WORK/straight.txt"
ckpt=$(fresh_dir ckpt)
assert_succeeds "${RUN[@]}" --lr 3e-3 --save "$ckpt" --save-interval 4 --exit-interval 4

step "a different --lr and --lr-decay-style on resume are refused, naming both values and the way out"
assert_fails_with "this run's learning-rate schedule differs from the checkpoint's" \
  "${RUN[@]}" --lr 1e-3 --lr-decay-style cosine --load "$ckpt"
assert_contains "$WORK/err.txt" "learning rate (--lr): checkpoint 0.003, this run 0.001"
assert_contains "$WORK/err.txt" "learning rate decay style (--lr-decay-style): checkpoint linear, this run cosine"
assert_contains "$WORK/err.txt" "--use-checkpoint-opt-param-scheduler"

step "--use-checkpoint-opt-param-scheduler: the checkpoint's schedule goes on, learning rates as in the straight run"
assert_succeeds "${RUN[@]}" --lr 1e-3 --lr-decay-style cosine --load "$ckpt" --use-checkpoint-opt-param-scheduler
assert_contains "$WORK/out.txt" "INFO:megatron.core.optimizer_param_scheduler: > using checkpoint value 0.003 for learning rate"
diff <(sed -n '5,8p' "$WORK/straight.txt") <(lrs "$WORK/out.txt") || fail "the resumed learning rates differ from the straight run's"
ok "iterations 5-8 at the straight run's learning rates"

step "--override-opt-param-scheduler: this command line's schedule from the saved step on"
assert_succeeds "${RUN[@]}" --lr 1e-3 --load "$ckpt" --override-opt-param-scheduler
assert_contains "$WORK/out.txt" "INFO:megatron.core.optimizer_param_scheduler: > overriding learning rate value to 0.001"
# Linear decay over 32 samples after 4 of warmup: at 20 samples 1e-4 + 9e-4 * (1 - 16/28).
assert_eq "5 4.857143E-04" "$(lrs "$WORK/out.txt" | head -1)" "iteration 5's learning rate"

step "both flags together are refused"
assert_fails_with "--override-opt-param-scheduler and --use-checkpoint-opt-param-scheduler cannot be used together" \
  "${RUN[@]}" --lr 3e-3 --load "$ckpt" --override-opt-param-scheduler --use-checkpoint-opt-param-scheduler

step "a checkpoint saved with --no-save-rng: the resume stops unless --no-load-rng or --finetune"
norng=$(fresh_dir norng)
assert_succeeds "${RUN[@]}" --lr 3e-3 --save "$norng" --save-interval 4 --exit-interval 4 --no-save-rng
assert_fails_with "has no random-number-generator state (saved with --no-save-rng); use --no-load-rng or --finetune" \
  "${RUN[@]}" --lr 3e-3 --load "$norng"
assert_succeeds "${RUN[@]}" --lr 3e-3 --load "$norng" --no-load-rng
assert_succeeds "${RUN[@]}" --lr 3e-3 --load "$norng" --finetune

step "a --save folder holding another run's checkpoints of this model: a warning naming them, then the run"
assert_succeeds "${RUN[@]}" --lr 3e-3 --save "$ckpt" --save-interval 2 --train-iters 2
assert_contains "$WORK/out.txt" "WARNING: --save $ckpt already holds checkpoints of another run (iteration 4; the tracker names 4); this run starts at iteration 0, and once its first checkpoint is saved they are removed"
assert_contains "$WORK/out.txt" "removed checkpoint $ckpt/iter_0000004 of the run that used this --save folder before"
assert_eq 2 "$(cat "$ckpt/latest_checkpointed_iteration.txt")" "the tracker after the new run"
[[ -d $ckpt/iter_0000002 && ! -e $ckpt/iter_0000004 ]] || fail "the other run's iteration 4 is still beside the new tracker"
ok "only the new run's iteration 2 is left"

step "... of another model: refused before anything is overwritten, naming the differences"
assert_fails_with "already holds checkpoints of another run (iteration 2; the tracker names 2) for a different model" \
  "${RUN[@]}" --lr 3e-3 --hidden-size 64 --save "$ckpt" --save-interval 2 --train-iters 2
assert_contains "$WORK/err.txt" "hidden_size"
assert_eq 2 "$(cat "$ckpt/latest_checkpointed_iteration.txt")" "the tracker after the refusal"
