#!/usr/bin/env bash
# Mixture-of-experts training in megatron_train: moe_lib.sh's 4-layer GPT whose layers 0 and 2 are
# MoE layers (4 experts, top-2, SwiGLU, a shared expert, aux and z losses), fp32, no dropout.
#   1. One process prints Megatron's iteration line with the auxiliary losses after the lm loss
#      (z_loss, then load_balancing_loss), near 1 for the balanced start as Megatron's loss is.
#   2. EP2 x DP2 with the distributed optimizer (alltoall dispatcher), EP4 (alltoall), PP2,
#      EP2 x PP2, TP2 + SP (the experts split over TP), CP2 x EP2 x TP2 + SP with seq_aux_loss
#      (alltoall) and
#      EP2 x TP2 x PP2 + SP with the distributed optimizer give the single process's lm loss,
#      z_loss and load_balancing_loss at every iteration (within 1e-5).
#   3. Checkpoints of iteration 6 resume with the same losses: PP2 in one process, EP2 x DP2 in its
#      own layout (folders mp_rank_00_EEE) and at EP4, EP2 x TP2 x PP2 at EP1 x TP1 x DP2.
#   4. TensorBoard gets load_balancing_loss and z_loss scalars (and, with --moe-per-layer-logging,
#      each layer's, whose mean over the MoE layers they are).
#   5. The aux-loss-free expert bias: updated every step (the losses differ without it), the same
#      at EP2 x TP2 + SP as in one process, saved and resumed.
set -uo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=mpi_lib.sh
source "$(dirname "$0")/mpi_lib.sh"
# shellcheck source=moe_lib.sh
source "$(dirname "$0")/moe_lib.sh"

ITERS=12
read -r -a base <<<"$(layout_flags 1 4) --eval-interval 6"  # layout_flags trains ITERS iterations

step "one process"
assert_succeeds "$TRAIN" "${base[@]}" "${moe[@]}" --tensorboard-dir "$WORK/tb" --moe-per-layer-logging
cp "$WORK/out.txt" "$WORK/single.txt"
grep -q ' lm loss: [0-9.E+-]* | z_loss: [0-9.E+-]* | load_balancing_loss: [0-9.E+-]* | loss scale: 1.0 |' "$WORK/single.txt" ||
  { show "$WORK/single.txt" stdout; fail "the iteration line lacks '| z_loss: ... | load_balancing_loss: ... |' after the lm loss"; }
first=$(column "$WORK/single.txt" load_balancing_loss | awk 'NR == 1 { print $2 }')
awk -v v="$first" 'BEGIN { exit !(v > 0.95 && v < 1.1) }' || fail "load_balancing_loss at iteration 1 is $first, not near 1"
ok "iteration line with z_loss and load_balancing_loss ($first at iteration 1)"
# 4 layers, MoE layers 0 and 2: --moe-per-layer-logging's tags for all 4.
"$PYTHON" "$(dirname "$0")/tensorboard_read.py" "$WORK/tb" "$WORK/single.txt" --expect-tag load_balancing_loss \
  --expect-tag z_loss --absent-tag "load_balancing_loss vs samples" --moe-layers 4 2 ||
  fail "TensorBoard differs from the log"

step "EP2 x DP2 with the distributed optimizer and the alltoall dispatcher, saving at iteration 6"
ep=(--expert-model-parallel-size)
assert_succeeds mpi 4 "${base[@]}" "${moe[@]}" "${ep[@]}" 2 --use-distributed-optimizer \
  --moe-token-dispatcher-type alltoall --save "$WORK/ckpt_ep" --save-interval 6
compare_all "$WORK/single.txt" "$WORK/out.txt" "EP2 x DP2 distopt alltoall"
for e in 000 001; do
  [[ -f $WORK/ckpt_ep/iter_0000006/mp_rank_00_$e/distrib_optim.dp_rank_001.safetensors ]] ||
    fail "no mp_rank_00_$e/distrib_optim.dp_rank_001.safetensors (Megatron's expert-parallel folder names)"
done
ok "checkpoint folders mp_rank_00_000 and mp_rank_00_001, one optimizer file per expert-data-parallel rank"

step "EP4 with the alltoall dispatcher"
assert_succeeds mpi 4 "${base[@]}" "${moe[@]}" "${ep[@]}" 4 --moe-token-dispatcher-type alltoall
compare_all "$WORK/single.txt" "$WORK/out.txt" "EP4 alltoall"

step "PP2, saving at iteration 6"
assert_succeeds mpi 2 "${base[@]}" "${moe[@]}" --pipeline-model-parallel-size 2 --save "$WORK/ckpt" --save-interval 6
compare_all "$WORK/single.txt" "$WORK/out.txt" "PP2"

step "EP2 x PP2 (allgather dispatcher)"
assert_succeeds mpi 4 "${base[@]}" "${moe[@]}" "${ep[@]}" 2 --pipeline-model-parallel-size 2
compare_all "$WORK/single.txt" "$WORK/out.txt" "EP2 x PP2"

step "TP2 with sequence parallelism: the allgather dispatcher, the experts split over TP"
assert_succeeds mpi 2 "${base[@]}" "${moe[@]}" \
  --tensor-model-parallel-size 2 --sequence-parallel --make-vocab-size-divisible-by 256
compare_all "$WORK/single.txt" "$WORK/out.txt" "TP2 + SP"

step "seq_aux_loss: one process, and CP2 x EP2 x TP2 + SP with the alltoall dispatcher (each rank's part of every sequence)"
assert_succeeds "$TRAIN" "${base[@]}" "${moe[@]}" --moe-router-load-balancing-type seq_aux_loss
cp "$WORK/out.txt" "$WORK/single_seq.txt"
assert_succeeds mpi 8 "${base[@]}" "${moe[@]}" --moe-router-load-balancing-type seq_aux_loss "${ep[@]}" 2 \
  --tensor-model-parallel-size 2 --sequence-parallel --make-vocab-size-divisible-by 256 --moe-token-dispatcher-type alltoall \
  --context-parallel-size 2
compare_all "$WORK/single_seq.txt" "$WORK/out.txt" "seq_aux_loss at CP2 x EP2 x TP2 + SP alltoall"

step "EP2 x TP2 x PP2 with sequence parallelism and the distributed optimizer, saving at iteration 6"
assert_succeeds mpi 8 "${base[@]}" "${moe[@]}" "${ep[@]}" 2 --tensor-model-parallel-size 2 --sequence-parallel \
  --make-vocab-size-divisible-by 256 --pipeline-model-parallel-size 2 --use-distributed-optimizer \
  --save "$WORK/ckpt_tp" --save-interval 6
compare_all "$WORK/single.txt" "$WORK/out.txt" "EP2 x TP2 x PP2 + SP distopt"

step "the PP2 checkpoint of iteration 6 in one process"
echo 6 >"$WORK/ckpt/latest_checkpointed_iteration.txt"
assert_succeeds "$TRAIN" "${base[@]}" "${moe[@]}" --load "$WORK/ckpt"
assert_contains "$WORK/out.txt" "successfully loaded checkpoint from $WORK/ckpt"
compare_all "$WORK/single.txt" "$WORK/out.txt" "resumed at PP1" 7

step "the EP2 x DP2 checkpoint of iteration 6: in its own layout, and at EP4 (resharded)"
echo 6 >"$WORK/ckpt_ep/latest_checkpointed_iteration.txt"
assert_succeeds mpi 4 "${base[@]}" "${moe[@]}" "${ep[@]}" 2 --use-distributed-optimizer --load "$WORK/ckpt_ep"
! grep -q "resharding" "$WORK/out.txt" || fail "the same layout was resharded"
compare_all "$WORK/single.txt" "$WORK/out.txt" "EP2 x DP2 resumed" 7
assert_succeeds mpi 4 "${base[@]}" "${moe[@]}" "${ep[@]}" 4 --use-distributed-optimizer --load "$WORK/ckpt_ep"
assert_contains "$WORK/out.txt" "x expert-model-parallel size 2 to 1 x 1 (1) x 4"
compare_all "$WORK/single.txt" "$WORK/out.txt" "EP2 x DP2 resumed at EP4" 7

step "the EP2 x TP2 x PP2 checkpoint of iteration 6 at EP1 x TP1 x DP2 (resharded)"
echo 6 >"$WORK/ckpt_tp/latest_checkpointed_iteration.txt"
assert_succeeds mpi 2 "${base[@]}" "${moe[@]}" --load "$WORK/ckpt_tp"
assert_contains "$WORK/out.txt" "resharding checkpoint $WORK/ckpt_tp/iter_0000006 from tensor-model-parallel size 2"
compare_all "$WORK/single.txt" "$WORK/out.txt" "EP2 x TP2 x PP2 resumed at TP1 x DP2" 7

step "aux-loss-free balancing (sigmoid router, expert bias): one process, EP2 x TP2 + SP saving at 6, resumed in one"
sigmoid=(--moe-router-score-function sigmoid --moe-router-topk-scaling-factor 2.5 --moe-router-bias-update-rate 1e-2)
bias=("${sigmoid[@]}" --moe-router-enable-expert-bias)
assert_succeeds "$TRAIN" "${base[@]}" "${moe[@]}" "${bias[@]}"
cp "$WORK/out.txt" "$WORK/single_bias.txt"
assert_succeeds "$TRAIN" "${base[@]}" "${moe[@]}" "${sigmoid[@]}"
! cmp -s <(column "$WORK/single_bias.txt" "lm loss") <(column "$WORK/out.txt" "lm loss") ||
  fail "the expert bias changed nothing: its updates do not reach the routing"
assert_succeeds mpi 4 "${base[@]}" "${moe[@]}" "${bias[@]}" "${ep[@]}" 2 --tensor-model-parallel-size 2 \
  --sequence-parallel --make-vocab-size-divisible-by 256 --save "$WORK/ckpt_bias" --save-interval 6
compare_all "$WORK/single_bias.txt" "$WORK/out.txt" "expert bias at EP2 x TP2 + SP"
echo 6 >"$WORK/ckpt_bias/latest_checkpointed_iteration.txt"
assert_succeeds "$TRAIN" "${base[@]}" "${moe[@]}" "${bias[@]}" --load "$WORK/ckpt_bias"
compare_all "$WORK/single_bias.txt" "$WORK/out.txt" "expert bias resumed in one process" 7

echo "PASS"
