#!/usr/bin/env bash
# Attention dropout under context parallelism in megatron_train: CP2 x TP2 with sequence
# parallelism, --attention-dropout 0.1 and --hidden-dropout 0.1 (Megatron's defaults), 4 ranks.
# One case per call (see run_case in lib.sh); `dropout` is the run the others compare with.
#   1. The attention masks are applied: the losses differ from the same run without attention
#      dropout.
#   2. Selective recomputation redraws the same masks: --recompute-activations gives the same
#      losses, digit for digit.
#   3. The checkpoint of iteration 6 resumes bit for bit: the model-parallel stream the masks
#      come from is saved and restored.
#   4. A sanity bound on the expected loss: every iteration within 1% of one process with the
#      same dropout (other masks; 1e-3 apart here).
set -uo pipefail
CASES=(
  "dropout 4"
  "without_attention_dropout 4 dropout"
  "recompute 4 dropout"
  "resume 4 dropout"
  "one_process 1 dropout"
)
[[ ${1:-} == --list ]] && { printf '%s\n' "${CASES[@]}"; exit 0; }
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=mpi_lib.sh
source "$(dirname "$0")/mpi_lib.sh"
ITERS=12

read -r -a base <<<"$(layout_flags 2 2) --eval-interval 6"  # layout_flags trains ITERS iterations
cp_flags=(--context-parallel-size 2 --sequence-parallel)
dropout=(--attention-dropout 0.1 --hidden-dropout 0.1)

case_dropout() {
  step "CP2 x TP2 + SP with attention and hidden dropout 0.1, saving at iteration 6"
  rm -rf "$SHARED/ckpt"
  assert_succeeds mpi 4 "${base[@]}" "${cp_flags[@]}" "${dropout[@]}" --save "$SHARED/ckpt" --save-interval 6
  cp "$WORK/out.txt" "$SHARED/dropout.txt"
}

case_without_attention_dropout() {
  step "the same without attention dropout: other losses"
  local reference
  reference=$(shared dropout.txt) || exit 1
  assert_succeeds mpi 4 "${base[@]}" "${cp_flags[@]}" --hidden-dropout 0.1
  losses "$WORK/out.txt" >"$WORK/plain_losses.txt"
  losses "$reference" >"$WORK/dropout_losses.txt"
  [[ -n $(sed -n 2p "$WORK/plain_losses.txt") ]] || { show "$WORK/out.txt" stdout; fail "no iteration 2"; }
  [[ $(sed -n 2p "$WORK/plain_losses.txt") != "$(sed -n 2p "$WORK/dropout_losses.txt")" ]] ||
    fail "iteration 2 has the same loss with and without attention dropout"
  ok "iteration 2: $(sed -n '2s/.* //p' "$WORK/dropout_losses.txt") with attention dropout, $(sed -n '2s/.* //p' "$WORK/plain_losses.txt") without"
}

case_recompute() {
  step "--recompute-activations: the attention core recomputed with the same masks"
  local reference
  reference=$(shared dropout.txt) || exit 1
  assert_succeeds mpi 4 "${base[@]}" "${cp_flags[@]}" "${dropout[@]}" --recompute-activations
  compare_iterations "$reference" "$WORK/out.txt" "selective recomputation" 1 "$ITERS" same "lm loss"
}

case_resume() {
  step "resumed from iteration 6"
  local reference ckpt
  reference=$(shared dropout.txt) && ckpt=$(shared ckpt) || exit 1
  echo 6 >"$ckpt/latest_checkpointed_iteration.txt"
  assert_succeeds mpi 4 "${base[@]}" "${cp_flags[@]}" "${dropout[@]}" --load "$ckpt"
  assert_contains "$WORK/out.txt" "successfully loaded checkpoint from $ckpt"
  compare_iterations "$reference" "$WORK/out.txt" "iterations 7-$ITERS after the resume" 7 "$ITERS" same "lm loss"
}

case_one_process() {
  step "one process with the same dropout"
  local reference
  reference=$(shared dropout.txt) || exit 1
  # shellcheck disable=SC2046  # the flag list splits into words
  assert_succeeds "$TRAIN" $(layout_flags 1 2) --eval-interval 6 "${dropout[@]}"
  compare_losses "$WORK/out.txt" "$reference" "CP2 x TP2 with dropout against one process with dropout" 1 1e-2
}

run_case "$1"
