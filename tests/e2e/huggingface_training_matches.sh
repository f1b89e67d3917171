#!/usr/bin/env bash
# A transformers Mixtral imported, trained here and compared step by step with the same model
# trained by transformers and plain PyTorch (hf_train_reference.py, written from Megatron's
# definitions of the loss, clipping and Adam): a randomly initialised MixtralForCausalLM (4
# experts, top-2, GQA) becomes a checkpoint; megatron_train trains it 8 iterations from it
# (--finetune) in one process and at expert-parallel 2 x data-parallel 2 (2 ranks); each run's
# checkpoint is exported back to HuggingFace. The reference trains on the same samples
# (train_samples reads them as the trainer does). Every iteration's loss agrees within 1e-5, and
# so do the final weights (see hf_train_reference.py for where Adam lets single elements part).
# PYTHON must have transformers (scripts/setup.sh puts it into .venv).
set -uo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=mpi_lib.sh
source "$(dirname "$0")/mpi_lib.sh"
need_tools TRAIN CONVERT TRAIN_SAMPLES MPIEXEC
ITERS=8 BATCH=4 LR=1e-3 WD=0.01 CLIP=1.0

step "a random transformers Mixtral imported to a checkpoint"
assert_succeeds "$PYTHON" "$(dirname "$0")/hf_random_model.py" mixtral "$WORK/mixtral.hf"
assert_succeeds "$CONVERT" --model-type GPT --loader hf --saver megatron --load-dir "$WORK/mixtral.hf" \
  --save-dir "$WORK/mixtral.ckpt" --vocab-file "$VOCAB" --merge-file "$MERGES"
flags_line=$(sed -n 's/^train from it with: megatron_train \(.*\) --tensor-model-parallel-size.*/\1/p' "$WORK/out.txt")
MODEL=()
eval "MODEL=($flags_line)"  # the printed words are quoted for a shell
[[ ${#MODEL[@]} -gt 10 ]] || { cat "$WORK/out.txt"; fail "no megatron_train flags printed"; }
# A constant learning rate, no auxiliary loss (transformers' is one loss over all layers, Megatron's
# one per layer), Megatron's default weight decay, clipping and Adam.
# shellcheck disable=SC2054  # 100,0,0 is one value
RUN=("${MODEL[@]}" --micro-batch-size 2 --global-batch-size "$BATCH" --lr "$LR" --lr-decay-style constant
     --weight-decay "$WD" --clip-grad "$CLIP" --moe-aux-loss-coeff 0 --train-iters "$ITERS" --data-path "$GOLDEN"
     --data-cache-path "$WORK/cache" --split 100,0,0 --eval-iters 0 --log-interval 1)
ok "imported"

step "the samples megatron_train reads"
assert_succeeds "$TRAIN_SAMPLES" $((ITERS * BATCH)) "$WORK/samples.safetensors" "${RUN[@]}"
ok "$((ITERS * BATCH)) samples"

step "megatron_train: one process, and expert-parallel 2 x data-parallel 2 on 2 ranks; each exported"
assert_succeeds "$TRAIN" "${RUN[@]}" --load "$WORK/mixtral.ckpt" --finetune --save "$WORK/one.ckpt" \
  --save-interval "$ITERS"
cp "$WORK/out.txt" "$WORK/one.log"
assert_succeeds mpi 2 "${RUN[@]}" --expert-model-parallel-size 2 --load "$WORK/mixtral.ckpt" --finetune \
  --save "$WORK/ep2.ckpt" --save-interval "$ITERS"
cp "$WORK/out.txt" "$WORK/ep2.log"
for run in one ep2; do
  assert_succeeds "$CONVERT" --model-type GPT --loader megatron --saver hf --load-dir "$WORK/$run.ckpt" \
    --save-dir "$WORK/$run.hf"
done
ok "trained $ITERS iterations and exported"

step "the reference trains the same model on the same samples; losses and weights agree"
assert_succeeds "$PYTHON" "$(dirname "$0")/hf_train_reference.py" "$WORK/mixtral.hf" "$WORK/samples.safetensors" \
  "$ITERS" "$BATCH" "$LR" "$WD" "$CLIP" "$WORK/one.log:$WORK/one.hf" "$WORK/ep2.log:$WORK/ep2.hf"
sed 's/^/   /' "$WORK/out.txt"
ok "every iteration's loss within 1e-5 of the reference's, the weights with it"
