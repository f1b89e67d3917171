#!/usr/bin/env bash
# Attention dropout under context parallelism in megatron_train: CP2 x TP2 with sequence
# parallelism, --attention-dropout 0.1 and --hidden-dropout 0.1 (Megatron's defaults), 4 ranks.
#   1. The attention masks are applied: the losses differ from the same run without attention
#      dropout.
#   2. Selective recomputation redraws the same masks: --recompute-activations gives the same
#      losses, digit for digit.
#   3. The checkpoint of iteration 6 resumes bit for bit: the model-parallel stream the masks
#      come from is saved and restored.
#   4. A sanity bound on the expected loss: every iteration within 1% of one process with the
#      same dropout (other masks; 1e-3 apart here).
set -uo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=mpi_lib.sh
source "$(dirname "$0")/mpi_lib.sh"
ITERS=12

read -r -a base <<<"$(layout_flags 2 2) --eval-interval 6"  # layout_flags trains ITERS iterations
cp_flags=(--context-parallel-size 2 --sequence-parallel)
dropout=(--attention-dropout 0.1 --hidden-dropout 0.1)

# identical A B WHAT [FIRST]: the lm losses of iterations FIRST.. of A and B are the same strings.
identical() {
  losses "$1" | awk -v first="${4:-1}" '$1 >= first' >"$WORK/a.txt"
  losses "$2" | awk -v first="${4:-1}" '$1 >= first' >"$WORK/b.txt"
  [[ -s $WORK/b.txt ]] || { show "$2" "$3 output"; fail "$3: no iteration lines"; }
  cmp -s "$WORK/a.txt" "$WORK/b.txt" || { diff "$WORK/a.txt" "$WORK/b.txt" >&2; fail "$3: the losses differ"; }
  ok "$3: $(wc -l <"$WORK/b.txt") iterations identical"
}

step "CP2 x TP2 + SP with attention and hidden dropout 0.1, saving at iteration 6"
assert_succeeds mpi 4 "${base[@]}" "${cp_flags[@]}" "${dropout[@]}" --save "$WORK/ckpt" --save-interval 6
cp "$WORK/out.txt" "$WORK/dropout.txt"

step "the same without attention dropout: other losses"
assert_succeeds mpi 4 "${base[@]}" "${cp_flags[@]}" --hidden-dropout 0.1
losses "$WORK/out.txt" >"$WORK/plain_losses.txt"
losses "$WORK/dropout.txt" >"$WORK/dropout_losses.txt"
[[ $(sed -n 2p "$WORK/plain_losses.txt") != "$(sed -n 2p "$WORK/dropout_losses.txt")" ]] ||
  fail "iteration 2 has the same loss with and without attention dropout"
ok "iteration 2: $(sed -n '2s/.* //p' "$WORK/dropout_losses.txt") with attention dropout, $(sed -n '2s/.* //p' "$WORK/plain_losses.txt") without"

step "--recompute-activations: the attention core recomputed with the same masks"
assert_succeeds mpi 4 "${base[@]}" "${cp_flags[@]}" "${dropout[@]}" --recompute-activations
identical "$WORK/dropout.txt" "$WORK/out.txt" "selective recomputation"

step "resumed from iteration 6"
echo 6 >"$WORK/ckpt/latest_checkpointed_iteration.txt"
assert_succeeds mpi 4 "${base[@]}" "${cp_flags[@]}" "${dropout[@]}" --load "$WORK/ckpt"
assert_contains "$WORK/out.txt" "successfully loaded checkpoint from $WORK/ckpt"
identical "$WORK/dropout.txt" "$WORK/out.txt" "iterations 7-$ITERS after the resume" 7

step "one process with the same dropout"
# shellcheck disable=SC2046  # the flag list splits into words
assert_succeeds "$TRAIN" $(layout_flags 1 2) --eval-interval 6 "${dropout[@]}"
compare_losses "$WORK/out.txt" "$WORK/dropout.txt" "CP2 x TP2 with dropout against one process with dropout" 1 1e-2
echo "PASS"
