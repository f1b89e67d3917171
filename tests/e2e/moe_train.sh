#!/usr/bin/env bash
# Mixture-of-experts training in megatron_train: moe_lib.sh's 4-layer GPT whose layers 0 and 2 are
# MoE layers (4 experts, top-2, SwiGLU, a shared expert, aux and z losses), fp32, no dropout.
# One case per call (see run_case in lib.sh):
#   single     One process prints Megatron's iteration line with the auxiliary losses after the lm
#              loss (z_loss, then load_balancing_loss), near 1 for the balanced start as Megatron's
#              is; TensorBoard gets both (and, with --moe-per-layer-logging, each layer's, whose
#              mean over the MoE layers they are). The reference of the layouts below.
#   ep2_dp2_distopt_alltoall, ep4_alltoall, pp2, ep2_pp2, tp2_sp, ep2_tp2_pp2_sp_distopt: each
#              layout gives the single process's lm loss, z_loss and load_balancing_loss at every
#              iteration (within 1e-5); three of them save at iteration 6.
#   seq_aux_loss_cp2_ep2_tp2_sp   seq_aux_loss at CP2 x EP2 x TP2 + SP (alltoall) against its own
#              single process.
#   resume_pp2_in_one, resume_ep2_dp2, resume_ep2_tp2_pp2_at_dp2: those checkpoints resume with
#              the same losses: PP2 in one process, EP2 x DP2 in its own layout (folders
#              mp_rank_00_EEE) and at EP4, EP2 x TP2 x PP2 at EP1 x TP1 x DP2.
#   expert_bias  The aux-loss-free expert bias: updated every step (the losses differ without it),
#              the same at EP2 x TP2 + SP as in one process, saved and resumed.
set -uo pipefail
CASES=(
  "single 1"
  "ep2_dp2_distopt_alltoall 4 single"
  "ep4_alltoall 4 single"
  "pp2 2 single"
  "ep2_pp2 4 single"
  "tp2_sp 2 single"
  "seq_aux_loss_cp2_ep2_tp2_sp 4"
  "ep2_tp2_pp2_sp_distopt 4 single"
  "resume_pp2_in_one 1 single pp2"
  "resume_ep2_dp2 4 single ep2_dp2_distopt_alltoall"
  "resume_ep2_tp2_pp2_at_dp2 2 single ep2_tp2_pp2_sp_distopt"
  "expert_bias 4"
)
[[ ${1:-} == --list ]] && { printf '%s\n' "${CASES[@]}"; exit 0; }
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=mpi_lib.sh
source "$(dirname "$0")/mpi_lib.sh"
# shellcheck source=moe_lib.sh
source "$(dirname "$0")/moe_lib.sh"

ITERS=12
read -r -a base <<<"$(layout_flags 1 4) --eval-interval 6"  # layout_flags trains ITERS iterations
ep=(--expert-model-parallel-size)
tp2=(--tensor-model-parallel-size 2 --sequence-parallel --make-vocab-size-divisible-by 256)

# layout NAME NP FLAGS...: NAME's run on NP ranks against the single process; with --save among
# the flags its checkpoint goes to $SHARED/NAME.ckpt (saved at iteration 6).
layout() {
  local name=$1 np=$2
  shift 2
  local single
  single=$(shared single.txt) || exit 1
  assert_succeeds mpi "$np" "${base[@]}" "${moe[@]}" "$@"
  compare_all "$single" "$WORK/out.txt" "$name"
}
saving() { rm -rf "$SHARED/$1.ckpt"; echo --save "$SHARED/$1.ckpt" --save-interval 6; }

case_single() {
  step "one process"
  assert_succeeds "$TRAIN" "${base[@]}" "${moe[@]}" --tensorboard-dir "$WORK/tb" --moe-per-layer-logging
  cp "$WORK/out.txt" "$WORK/single.txt"
  grep -q ' lm loss: [0-9.E+-]* | z_loss: [0-9.E+-]* | load_balancing_loss: [0-9.E+-]* | loss scale: 1.0 |' "$WORK/single.txt" ||
    { show "$WORK/single.txt" stdout; fail "the iteration line lacks '| z_loss: ... | load_balancing_loss: ... |' after the lm loss"; }
  local first
  first=$(iteration_values "$WORK/single.txt" load_balancing_loss | awk 'NR == 1 { print $2 }')
  awk -v v="$first" 'BEGIN { exit !(v > 0.95 && v < 1.1) }' || fail "load_balancing_loss at iteration 1 is $first, not near 1"
  ok "iteration line with z_loss and load_balancing_loss ($first at iteration 1)"
  # 4 layers, MoE layers 0 and 2: --moe-per-layer-logging's tags for all 4.
  "$PYTHON" "$(dirname "$0")/tensorboard_read.py" "$WORK/tb" "$WORK/single.txt" --expect-tag load_balancing_loss \
    --expect-tag z_loss --absent-tag "load_balancing_loss vs samples" --moe-layers 4 2 ||
    fail "TensorBoard differs from the log"
  cp "$WORK/single.txt" "$SHARED/single.txt"
}

case_ep2_dp2_distopt_alltoall() {
  step "EP2 x DP2 with the distributed optimizer and the alltoall dispatcher, saving at iteration 6"
  # shellcheck disable=SC2046  # the save flags are separate words
  layout "EP2 x DP2 distopt alltoall" 4 "${ep[@]}" 2 --use-distributed-optimizer --moe-token-dispatcher-type alltoall \
    $(saving ep2_dp2)
  for e in 000 001; do
    [[ -f $SHARED/ep2_dp2.ckpt/iter_0000006/mp_rank_00_$e/distrib_optim.dp_rank_001.safetensors ]] ||
      fail "no mp_rank_00_$e/distrib_optim.dp_rank_001.safetensors (Megatron's expert-parallel folder names)"
  done
  ok "checkpoint folders mp_rank_00_000 and mp_rank_00_001, one optimizer file per expert-data-parallel rank"
}

case_ep4_alltoall() {
  step "EP4 with the alltoall dispatcher"
  layout "EP4 alltoall" 4 "${ep[@]}" 4 --moe-token-dispatcher-type alltoall
}

case_pp2() {
  step "PP2, saving at iteration 6"
  # shellcheck disable=SC2046
  layout "PP2" 2 --pipeline-model-parallel-size 2 $(saving pp2)
}

case_ep2_pp2() {
  step "EP2 x PP2 (allgather dispatcher)"
  layout "EP2 x PP2" 4 "${ep[@]}" 2 --pipeline-model-parallel-size 2
}

case_tp2_sp() {
  step "TP2 with sequence parallelism: the allgather dispatcher, the experts split over TP"
  layout "TP2 + SP" 2 "${tp2[@]}"
}

case_seq_aux_loss_cp2_ep2_tp2_sp() {
  step "seq_aux_loss: one process, and CP2 x EP2 x TP2 + SP with the alltoall dispatcher (each rank's part of every sequence)"
  assert_succeeds "$TRAIN" "${base[@]}" "${moe[@]}" --moe-router-load-balancing-type seq_aux_loss
  cp "$WORK/out.txt" "$WORK/single_seq.txt"
  assert_succeeds mpi 8 "${base[@]}" "${moe[@]}" --moe-router-load-balancing-type seq_aux_loss "${ep[@]}" 2 \
    "${tp2[@]}" --moe-token-dispatcher-type alltoall --context-parallel-size 2
  compare_all "$WORK/single_seq.txt" "$WORK/out.txt" "seq_aux_loss at CP2 x EP2 x TP2 + SP alltoall"
}

case_ep2_tp2_pp2_sp_distopt() {
  step "EP2 x TP2 x PP2 with sequence parallelism and the distributed optimizer, saving at iteration 6"
  # shellcheck disable=SC2046
  layout "EP2 x TP2 x PP2 + SP distopt" 8 "${ep[@]}" 2 "${tp2[@]}" --pipeline-model-parallel-size 2 \
    --use-distributed-optimizer $(saving ep2_tp2_pp2)
}

# resumed CKPT: CKPT (a case's, in $SHARED) with its tracker at iteration 6.
resumed() {
  local ckpt
  ckpt=$(shared "$1") || exit 1
  echo 6 >"$ckpt/latest_checkpointed_iteration.txt"
  echo "$ckpt"
}

case_resume_pp2_in_one() {
  step "the PP2 checkpoint of iteration 6 in one process"
  local ckpt single
  ckpt=$(resumed pp2.ckpt) && single=$(shared single.txt) || exit 1
  assert_succeeds "$TRAIN" "${base[@]}" "${moe[@]}" --load "$ckpt"
  assert_contains "$WORK/out.txt" "successfully loaded checkpoint from $ckpt"
  compare_all "$single" "$WORK/out.txt" "resumed at PP1" 7
}

case_resume_ep2_dp2() {
  step "the EP2 x DP2 checkpoint of iteration 6: in its own layout, and at EP4 (resharded)"
  local ckpt single
  ckpt=$(resumed ep2_dp2.ckpt) && single=$(shared single.txt) || exit 1
  assert_succeeds mpi 4 "${base[@]}" "${moe[@]}" "${ep[@]}" 2 --use-distributed-optimizer --load "$ckpt"
  ! grep -q "resharding" "$WORK/out.txt" || fail "the same layout was resharded"
  compare_all "$single" "$WORK/out.txt" "EP2 x DP2 resumed" 7
  assert_succeeds mpi 4 "${base[@]}" "${moe[@]}" "${ep[@]}" 4 --use-distributed-optimizer --load "$ckpt"
  assert_contains "$WORK/out.txt" "x expert-model-parallel size 2 to 1 x 1 (1) x 4"
  compare_all "$single" "$WORK/out.txt" "EP2 x DP2 resumed at EP4" 7
}

case_resume_ep2_tp2_pp2_at_dp2() {
  step "the EP2 x TP2 x PP2 checkpoint of iteration 6 at EP1 x TP1 x DP2 (resharded)"
  local ckpt single
  ckpt=$(resumed ep2_tp2_pp2.ckpt) && single=$(shared single.txt) || exit 1
  assert_succeeds mpi 2 "${base[@]}" "${moe[@]}" --load "$ckpt"
  assert_contains "$WORK/out.txt" "resharding checkpoint $ckpt/iter_0000006 from tensor-model-parallel size 2"
  compare_all "$single" "$WORK/out.txt" "EP2 x TP2 x PP2 resumed at TP1 x DP2" 7
}

case_expert_bias() {
  step "aux-loss-free balancing (sigmoid router, expert bias): one process, EP2 x TP2 + SP saving at 6, resumed in one"
  local sigmoid=(--moe-router-score-function sigmoid --moe-router-topk-scaling-factor 2.5 --moe-router-bias-update-rate 1e-2)
  local bias=("${sigmoid[@]}" --moe-router-enable-expert-bias)
  assert_succeeds "$TRAIN" "${base[@]}" "${moe[@]}" "${bias[@]}"
  cp "$WORK/out.txt" "$WORK/single_bias.txt"
  assert_succeeds "$TRAIN" "${base[@]}" "${moe[@]}" "${sigmoid[@]}"
  ! cmp -s <(losses "$WORK/single_bias.txt") <(losses "$WORK/out.txt") ||
    fail "the expert bias changed nothing: its updates do not reach the routing"
  assert_succeeds mpi 4 "${base[@]}" "${moe[@]}" "${bias[@]}" "${ep[@]}" 2 "${tp2[@]}" --save "$WORK/ckpt_bias" \
    --save-interval 6
  compare_all "$WORK/single_bias.txt" "$WORK/out.txt" "expert bias at EP2 x TP2 + SP"
  echo 6 >"$WORK/ckpt_bias/latest_checkpointed_iteration.txt"
  assert_succeeds "$TRAIN" "${base[@]}" "${moe[@]}" "${bias[@]}" --load "$WORK/ckpt_bias"
  compare_all "$WORK/single_bias.txt" "$WORK/out.txt" "expert bias resumed in one process" 7
}

run_case "$1"
