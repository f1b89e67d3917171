#!/usr/bin/env bash
# The experts with a tensor-parallel size of their own (--expert-tensor-parallel-size) in
# megatron_train, on moe_lib.sh's model; one case per call (see run_case in lib.sh):
#   1. TP2 + SP with the experts whole (expert TP 1) at EP2 (alltoall), at EP1 x DP2 (allgather),
#      and at EP2 x PP2; TP1 x DP2 with each expert split over expert TP 2; all with the
#      distributed optimizer, all giving the single process's lm loss, z_loss and
#      load_balancing_loss at every iteration (within 1e-5).
#   2. Their checkpoints (this build's folder rule: max(TP, expert TP) folders per stage and EP
#      rank, meta.json recording both sizes) resume with the same losses in their own layout, at
#      another DP size (the distributed optimizer's state gathered from the folders holding it),
#      at another expert TP size (resharded), and in one process.
set -uo pipefail
CASES=(
  "single 1"
  "tp2_etp1_ep2_alltoall 2 single"
  "tp2_dp2_etp1 4 single"
  "tp2_etp1_ep2_pp2 4 single"
  "tp1_dp2_etp2 2 single"
  "resume_same_model_layout 2 single tp2_etp1_ep2_alltoall tp2_dp2_etp1"
  "resume_resharded 2 single tp2_etp1_ep2_alltoall tp1_dp2_etp2"
)
[[ ${1:-} == --list ]] && { printf '%s\n' "${CASES[@]}"; exit 0; }
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=mpi_lib.sh
source "$(dirname "$0")/mpi_lib.sh"
# shellcheck source=moe_lib.sh
source "$(dirname "$0")/moe_lib.sh"

ITERS=10
read -r -a base <<<"$(layout_flags 1 4) --eval-interval 5 --use-distributed-optimizer"
tp2=(--tensor-model-parallel-size 2 --sequence-parallel --make-vocab-size-divisible-by 256)
etp=(--expert-tensor-parallel-size)
ep=(--expert-model-parallel-size)

# meta_value FOLDER KEY: KEY of FOLDER's meta.json.
meta_value() {
  "$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1] + "/meta.json"))[sys.argv[2]])' "$1" "$2"
}
# folders CKPT: the shard folders of CKPT's iteration 5, space-separated.
folders() {
  (cd "$1/iter_0000005" && ls -d mp_rank_* | tr '\n' ' ')
}
# layout NAME NP FLAGS...: a run on NP ranks against the single process.
layout() {
  local name=$1 np=$2 single
  shift 2
  single=$(shared single.txt) || exit 1
  assert_succeeds mpi "$np" "${base[@]}" "${moe[@]}" "$@"
  compare_all "$single" "$WORK/out.txt" "$name"
}
saving() { rm -rf "$SHARED/$1.ckpt"; echo --save "$SHARED/$1.ckpt" --save-interval 5; }
# resumed CKPT: CKPT (a case's, in $SHARED) with its tracker at iteration 5.
resumed() {
  local ckpt
  ckpt=$(shared "$1") || exit 1
  echo 5 >"$ckpt/latest_checkpointed_iteration.txt"
  echo "$ckpt"
}

case_single() {
  step "one process"
  assert_succeeds "$TRAIN" "${base[@]}" "${moe[@]}"
  cp "$WORK/out.txt" "$SHARED/single.txt"
}

case_tp2_etp1_ep2_alltoall() {
  step "TP2 + SP, experts whole (expert TP 1) at EP2 with the alltoall dispatcher, saving at iteration 5"
  # shellcheck disable=SC2046  # the save flags are separate words
  layout "TP2 x expert TP1 x EP2 alltoall" 2 "${tp2[@]}" "${etp[@]}" 1 "${ep[@]}" 2 \
    --moe-token-dispatcher-type alltoall $(saving ep2)
  local ckpt=$SHARED/ep2.ckpt
  [[ $(folders "$ckpt") == "mp_rank_00_000 mp_rank_01_001 " ]] ||
    fail "folders $(folders "$ckpt"), not mp_rank_00_000 mp_rank_01_001 (each rank's TP shard and EP rank)"
  [[ $(meta_value "$ckpt/iter_0000005/mp_rank_01_001" expert_tensor_parallel_size) == 1 &&
    $(meta_value "$ckpt/iter_0000005/mp_rank_01_001" tensor_model_parallel_size) == 2 ]] ||
    fail "meta.json does not record tensor_model_parallel_size 2 and expert_tensor_parallel_size 1"
  ok "folders mp_rank_00_000 and mp_rank_01_001; meta.json records TP 2 and expert TP 1"
}

case_tp2_dp2_etp1() {
  step "TP2 x DP2 + SP, experts whole on every rank (EP1, allgather), saving at iteration 5"
  # shellcheck disable=SC2046
  layout "TP2 x DP2 x expert TP1" 4 "${tp2[@]}" "${etp[@]}" 1 $(saving dp2)
}

case_tp2_etp1_ep2_pp2() {
  step "TP2 x EP2 x PP2 + SP with expert TP 1"
  layout "TP2 x expert TP1 x EP2 x PP2" 4 "${tp2[@]}" "${etp[@]}" 1 "${ep[@]}" 2 --pipeline-model-parallel-size 2
}

case_tp1_dp2_etp2() {
  step "TP1 x DP2 with each expert split over expert TP 2, saving at iteration 5"
  # shellcheck disable=SC2046
  layout "TP1 x DP2 x expert TP2" 2 "${etp[@]}" 2 $(saving etp2)
  [[ $(folders "$SHARED/etp2.ckpt") == "mp_rank_00 mp_rank_01 " ]] ||
    fail "folders $(folders "$SHARED/etp2.ckpt"), not mp_rank_00 mp_rank_01 (one per expert-TP shard)"
}

case_resume_same_model_layout() {
  step "the checkpoints in their own model layouts (no resharding)"
  local ep2 dp2 single
  ep2=$(resumed ep2.ckpt) && dp2=$(resumed dp2.ckpt) && single=$(shared single.txt) || exit 1
  assert_succeeds mpi 2 "${base[@]}" "${moe[@]}" "${tp2[@]}" "${etp[@]}" 1 "${ep[@]}" 2 \
    --moe-token-dispatcher-type alltoall --load "$ep2"
  ! grep -q "resharding" "$WORK/out.txt" || fail "the same layout was resharded"
  compare_all "$single" "$WORK/out.txt" "TP2 x expert TP1 x EP2 resumed" 6
  # At DP 1 the same model shards (no resharding), but each rank's share of the optimizer state is
  # now half the experts' state, which the DP2 run's four ranks wrote into both folders.
  assert_succeeds mpi 2 "${base[@]}" "${moe[@]}" "${tp2[@]}" "${etp[@]}" 1 --load "$dp2"
  ! grep -q "resharding" "$WORK/out.txt" || fail "the same model layout was resharded"
  compare_all "$single" "$WORK/out.txt" "TP2 x DP2 x expert TP1 resumed at DP1" 6
}

case_resume_resharded() {
  step "at another expert TP size, and in one process (resharded)"
  local ep2 etp2 single
  ep2=$(resumed ep2.ckpt) && etp2=$(resumed etp2.ckpt) && single=$(shared single.txt) || exit 1
  assert_succeeds mpi 2 "${base[@]}" "${moe[@]}" "${tp2[@]}" --load "$ep2"
  assert_contains "$WORK/out.txt" "x expert-model-parallel size 2 (expert-tensor-parallel size 1) to 2 x 1 (1) x 1 (2)"
  compare_all "$single" "$WORK/out.txt" "TP2 x expert TP1 x EP2 resumed at expert TP2 x EP1" 6
  assert_succeeds "$TRAIN" "${base[@]}" "${moe[@]}" --load "$etp2"
  assert_contains "$WORK/out.txt" "resharding checkpoint $etp2/iter_0000005 from tensor-model-parallel size 1"
  compare_all "$single" "$WORK/out.txt" "TP1 x expert TP2 resumed in one process" 6
}

run_case "$1"
