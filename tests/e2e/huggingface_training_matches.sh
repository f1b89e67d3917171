#!/usr/bin/env bash
# transformers models imported, trained here and compared step by step with the same models trained
# by transformers and plain PyTorch (hf_train_reference.py, written from Megatron's definitions of
# the loss, clipping and Adam): a randomly initialised MixtralForCausalLM (4 experts, top-2, GQA)
# and a Qwen3MoeForCausalLM (a dense layer, no renormalised top-k, query/key norms, head size 24)
# become checkpoints; megatron_train trains each from it (--finetune) in one process and in a
# parallel layout on 2 ranks (expert-parallel 2 x data-parallel 2; Qwen3-MoE with the all-to-all
# dispatcher); each run's checkpoint is exported back to HuggingFace. The reference trains on the same
# samples (train_samples reads them as the trainer does). Every iteration's loss agrees within
# 1e-5, and so do the final weights (see hf_train_reference.py for where Adam lets single elements
# part).
# PYTHON must have transformers (scripts/setup.sh puts it into .venv).
set -uo pipefail
CASES=("mixtral 2" "qwen3_moe 2")  # one case per call (see run_case in lib.sh)
[[ ${1:-} == --list ]] && { printf '%s\n' "${CASES[@]}"; exit 0; }
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=mpi_lib.sh
source "$(dirname "$0")/mpi_lib.sh"
need_tools TRAIN CONVERT TRAIN_SAMPLES MPIEXEC
BATCH=4 LR=1e-3 WD=0.01 CLIP=1.0

# match FAMILY ITERS LAYOUT_NAME "LAYOUT FLAGS" [LAYOUT_NAME "LAYOUT FLAGS" ...]: a random transformers
# model of FAMILY imported, trained ITERS iterations in one process and in each layout (on 2 ranks),
# each run exported; the reference trains it on the same samples and compares.
match() {
  local family=$1 iters=$2
  shift 2
  step "$family: a random transformers model imported to a checkpoint"
  assert_succeeds "$PYTHON" "$(dirname "$0")/hf_random_model.py" "$family" "$WORK/$family.hf"
  assert_succeeds "$CONVERT" --model-type GPT --loader hf --saver megatron --load-dir "$WORK/$family.hf" \
    --save-dir "$WORK/$family.ckpt" --vocab-file "$VOCAB" --merge-file "$MERGES"
  local flags_line model=() run=() runs=()
  flags_line=$(sed -n 's/^train from it with: megatron_train \(.*\) --tensor-model-parallel-size.*/\1/p' "$WORK/out.txt")
  eval "model=($flags_line)"  # the printed words are quoted for a shell
  [[ ${#model[@]} -gt 10 ]] || { cat "$WORK/out.txt"; fail "no megatron_train flags printed"; }
  # A constant learning rate, no auxiliary loss (transformers' is one loss over all layers,
  # Megatron's one per layer), Megatron's default weight decay, clipping and Adam.
  # shellcheck disable=SC2054  # 100,0,0 is one value
  run=("${model[@]}" --micro-batch-size 2 --global-batch-size "$BATCH" --lr "$LR" --lr-decay-style constant
       --weight-decay "$WD" --clip-grad "$CLIP" --moe-aux-loss-coeff 0 --train-iters "$iters" --data-path "$GOLDEN"
       --data-cache-path "$WORK/cache" --split 100,0,0 --eval-iters 0 --log-interval 1)
  assert_succeeds "$TRAIN_SAMPLES" $((iters * BATCH)) "$WORK/$family.samples" "${run[@]}"
  ok "imported; $((iters * BATCH)) samples as megatron_train reads them"

  step "$family: megatron_train in one process${3:+ and at $3 on 2 ranks}, each run exported"
  assert_succeeds "$TRAIN" "${run[@]}" --load "$WORK/$family.ckpt" --finetune --save "$WORK/$family.one.ckpt" \
    --save-interval "$iters"
  cp "$WORK/out.txt" "$WORK/$family.one.log"
  runs=(one)
  while [[ $# -gt 0 ]]; do
    # shellcheck disable=SC2086  # the layout's flags are separate words
    assert_succeeds mpi 2 "${run[@]}" $2 --load "$WORK/$family.ckpt" --finetune --save "$WORK/$family.$1.ckpt" \
      --save-interval "$iters"
    cp "$WORK/out.txt" "$WORK/$family.$1.log"
    runs+=("$1")
    shift 2
  done
  local pairs=()
  for name in "${runs[@]}"; do
    assert_succeeds "$CONVERT" --model-type GPT --loader megatron --saver hf --load-dir "$WORK/$family.$name.ckpt" \
      --save-dir "$WORK/$family.$name.hf"
    pairs+=("$WORK/$family.$name.log:$WORK/$family.$name.hf")
  done
  ok "trained $iters iterations and exported"

  step "$family: the reference trains the same model on the same samples; losses and weights agree"
  assert_succeeds "$PYTHON" "$(dirname "$0")/hf_train_reference.py" "$WORK/$family.hf" "$WORK/$family.samples" \
    "$iters" "$BATCH" "$LR" "$WD" "$CLIP" "${pairs[@]}"
  sed 's/^/   /' "$WORK/out.txt"
  ok "every iteration's loss within 1e-5 of the reference's, the weights with it"
}

case_mixtral() { match mixtral 8 ep2 "--expert-model-parallel-size 2"; }
# Qwen3-MoE: a dense layer among the MoE ones, the softmax before the top-k, query/key norms; the
# all-to-all dispatcher. (Not at TP2: the TP1 import's 50257 rows do not split over 2 ranks, and
# Megatron's padding would add logits transformers' model does not have.)
case_qwen3_moe() { match qwen3_moe 6 ep2_alltoall "--expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall"; }

run_case "$1"
