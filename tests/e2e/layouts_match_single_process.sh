#!/usr/bin/env bash
# Every parallel layout trains the single-process model: megatron_train under mpirun at each
# layout below gives every iteration's lm loss, and every validation loss, within 1e-5 (relative)
# of the single-process run with the same global batch (fp32, no dropout: dropout masks differ
# between layouts by design). In bf16 and fp16 the guides' layouts agree with the single process
# in that precision to one rounding of the loss in the format: splitting matrices over TP rounds
# partial sums in other places (2^-9 relative for bf16, 2^-12 for fp16; measured 5e-5 and 2e-4).
#
# One case per call, so that CTest reports each layout on its own and spreads them:
#   layouts_match_single_process.sh single_process_<layers>   the single-process run (2, 4 or 6
#                                  layers) the fp32 layouts compare with, kept in $LAYOUT_REFERENCES
#   layouts_match_single_process.sh <layout>    one layout against its reference (its own
#                                  single-process run for the mixed-precision and OWN cases)
#   layouts_match_single_process.sh --list      the layout names (CMake registers one test each)
#   layouts_match_single_process.sh --describe <layout>   its ranks, TP, layers and flags
# The layouts that resume_across_layouts.sh resumes also save at iteration 10 into
# $LAYOUT_REFERENCES/<layout>.ckpt, and every layout keeps its log as $LAYOUT_REFERENCES/<layout>.txt.
set -uo pipefail

DISTOPT_OVERLAP="--use-distributed-optimizer --overlap-grad-reduce --ddp-bucket-size 20000"
# name -> "ranks TP layers [flags]", fp32 against the single-process run with that many layers.
declare -A LAYOUT=(
  [tp2]="2 2 2"
  [tp2_sp]="2 2 2 --sequence-parallel"
  [tp4_sp]="4 4 2 --sequence-parallel"
  [dp2]="2 1 2"
  [dp4]="4 1 2"
  [dp4_distopt_overlap]="4 1 2 $DISTOPT_OVERLAP"
  [tp2_dp2_sp]="4 2 2 --sequence-parallel"
  [tp2_dp2_sp_distopt_overlap]="4 2 2 --sequence-parallel $DISTOPT_OVERLAP"
  [pp2]="2 1 4 --pipeline-model-parallel-size 2"
  [pp4]="4 1 4 --pipeline-model-parallel-size 4"
  [pp2_virtual2]="2 1 4 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1"
  [pp4_uneven]="4 1 6 --pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 1 --decoder-last-pipeline-num-layers 1"
  [tp2_pp2]="4 2 4 --pipeline-model-parallel-size 2"
  [tp2_pp2_dp2_virtual_sp_distopt]="8 2 4 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1 --sequence-parallel $DISTOPT_OVERLAP"
  [cp2]="2 1 2 --context-parallel-size 2"
  [cp4]="4 1 2 --context-parallel-size 4"
  [cp2_tp2_sp]="4 2 2 --context-parallel-size 2 --sequence-parallel"
  [cp2_pp2]="4 1 4 --context-parallel-size 2 --pipeline-model-parallel-size 2"
  [cp2_pp2_virtual2]="4 1 4 --context-parallel-size 2 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1"
  [cp2_dp2_distopt_overlap]="4 1 2 --context-parallel-size 2 $DISTOPT_OVERLAP"
  [cp4_all_gather]="4 1 2 --context-parallel-size 4 --cp-comm-type all_gather"
  [cp2_tp2_sp_all_gather]="4 2 2 --context-parallel-size 2 --sequence-parallel --cp-comm-type all_gather"
  [cp2_tp2_pp2_sp_distopt]="8 2 4 --context-parallel-size 2 --pipeline-model-parallel-size 2 --sequence-parallel --use-distributed-optimizer"
)
# name -> "precision ranks TP layers [flags]": against the single process in that precision.
declare -A MIXED=(
  [bf16_tp2_dp2_sp_distopt_overlap]="bf16 4 2 2 --sequence-parallel $DISTOPT_OVERLAP"
  [fp16_tp2_dp2_sp_distopt_overlap]="fp16 4 2 2 --sequence-parallel $DISTOPT_OVERLAP"
  [bf16_tp2_pp2_virtual_distopt]="bf16 4 2 4 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1 --use-distributed-optimizer"
  [bf16_cp2_tp2_sp_distopt]="bf16 4 2 2 --context-parallel-size 2 --sequence-parallel --use-distributed-optimizer"
  [fp16_tp2_pp2_virtual_distopt]="fp16 4 2 4 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1 --use-distributed-optimizer"
)
# name -> "ranks TP layers [layout flags] | model flags": fp32, against its own single-process run
# with the model flags (a model the shared references lack: RoPE and grouped-query attention).
declare -A OWN=(
  [cp2_tp2_sp_rope_gqa]="4 2 2 --context-parallel-size 2 --sequence-parallel | --position-embedding-type rope --normalization RMSNorm --swiglu --group-query-attention --num-query-groups 2"
  [cp4_seq256]="4 1 2 --context-parallel-size 4 | --seq-length 256 --max-position-embeddings 256 --position-embedding-type rope"
)
# The layouts whose checkpoints resume_across_layouts.sh loads, and files each must have written.
declare -A SAVES_AT_10=(
  [tp2_dp2_sp_distopt_overlap]="mp_rank_00/model.safetensors mp_rank_01/model.safetensors mp_rank_01/meta.json
    mp_rank_00/distrib_optim.dp_rank_000.safetensors mp_rank_00/distrib_optim.dp_rank_001.safetensors
    mp_rank_01/distrib_optim.dp_rank_001.safetensors"
  [cp2_dp2_distopt_overlap]="mp_rank_00/model.safetensors mp_rank_00/distrib_optim.dp_rank_000.safetensors"
  [tp2_pp2]="mp_rank_00_000/model.safetensors mp_rank_01_000/model.safetensors mp_rank_00_001/model.safetensors
    mp_rank_01_001/model.safetensors"
)

if [[ ${1:-} == --list ]]; then
  printf '%s\n' "${!LAYOUT[@]}" "${!MIXED[@]}" "${!OWN[@]}" | sort
  exit 0
elif [[ ${1:-} == --describe ]]; then  # --describe LAYOUT: its "ranks TP layers flags"
  echo "${LAYOUT[${2:?}]:?"no layout $2"}"
  exit 0
fi
CASE=${1:?"usage: $0 single_process_<layers>|--list|--describe LAYOUT|LAYOUT"}
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=mpi_lib.sh
source "$(dirname "$0")/mpi_lib.sh"

# compare_validation REF FILE WHAT: one validation line at iteration 10 (printed once, by the last
# stage), and every validation loss within 1e-5 of the single process's (at 10, 20 and the end).
compare_validation() {
  [[ $(grep -c 'validation loss at iteration 10 |' "$2") -eq 1 ]] ||
    { show "$2" stdout; fail "$3: expected one validation line at iteration 10"; }
  paste <(sed -n 's/.*lm loss value: \([0-9.E+-]*\) .*/\1/p' "$1") <(sed -n 's/.*lm loss value: \([0-9.E+-]*\) .*/\1/p' "$2") |
    awk -v what="$3" '{ n++; d = $1 - $2; if (d < 0) d = -d; if ($1 == "" || $2 == "" || d / $1 > 1e-5) { printf "FAIL: %s: validation loss %s, single process %s\n", what, $2, $1 > "/dev/stderr"; exit 1 } }
      END { if (n < 3) { printf "FAIL: %s: %d validation lines, expected at least 3\n", what, n > "/dev/stderr"; exit 1 } }' ||
    { show "$2" stdout; exit 1; }
  ok "$3: validation losses within 1e-5"
}

if [[ $CASE =~ ^single_process_([0-9]+)$ ]]; then
  layers=${BASH_REMATCH[1]}
  step "single-process reference run, $layers layers"
  mkdir -p "$LAYOUT_REFERENCES"
  rm -f "$LAYOUT_REFERENCES/$CASE.txt"
  # shellcheck disable=SC2046
  assert_succeeds "$TRAIN" $(layout_flags 1 "$layers")
  [[ $(losses "$WORK/out.txt" | wc -l) -eq $ITERS ]] || { show "$WORK/out.txt" stdout; fail "expected $ITERS iteration lines"; }
  cp "$WORK/out.txt" "$LAYOUT_REFERENCES/$CASE.txt"
  ok "$ITERS iterations"
  echo "PASS"
  exit 0
fi

if [[ -n ${LAYOUT[$CASE]:-} ]]; then
  read -r np tp layers extra <<<"${LAYOUT[$CASE]} "
  ref=$(reference_log "$layers") || exit 1
  save=()
  if [[ -n ${SAVES_AT_10[$CASE]:-} ]]; then
    rm -rf "$LAYOUT_REFERENCES/$CASE.ckpt"
    save=(--save "$LAYOUT_REFERENCES/$CASE.ckpt" --save-interval 10)
  fi
  step "$CASE: mpirun -n $np, TP $tp, $layers layers, $extra ${save[*]}"
  # shellcheck disable=SC2046,SC2086
  assert_succeeds mpi "$np" $(layout_flags "$tp" "$layers") $extra "${save[@]}"
  cp "$WORK/out.txt" "$LAYOUT_REFERENCES/$CASE.txt"
  compare_losses "$ref" "$WORK/out.txt" "$CASE"
  compare_validation "$ref" "$WORK/out.txt" "$CASE"
  if [[ -n ${SAVES_AT_10[$CASE]:-} ]]; then
    for f in ${SAVES_AT_10[$CASE]}; do
      [[ -s ${save[1]}/iter_0000010/$f ]] || { ls -R "${save[1]}" >&2; fail "iter_0000010/$f missing"; }
    done
    assert_eq 20 "$(cat "${save[1]}/latest_checkpointed_iteration.txt")" "tracker"
  fi
  case $CASE in
    tp2)
      assert_line "$WORK/out.txt" "using world size: 2, data-parallel size: 1, context-parallel size: 1, hierarchical context-parallel sizes: None, tensor-model-parallel size: 2, pipeline-model-parallel size: 1"
      [[ $(grep -c ' iteration *1/' "$WORK/out.txt") -eq 1 ]] || fail "the iteration line must come from one rank only" ;;
    pp2)
      assert_line "$WORK/out.txt" "using world size: 2, data-parallel size: 1, context-parallel size: 1, hierarchical context-parallel sizes: None, tensor-model-parallel size: 1, pipeline-model-parallel size: 2" ;;
    pp2_virtual2)
      assert_line "$WORK/out.txt" "Number of virtual stages per pipeline stage: 2" ;;
    cp2_tp2_pp2_sp_distopt)
      assert_line "$WORK/out.txt" "using world size: 8, data-parallel size: 1, context-parallel size: 2, hierarchical context-parallel sizes: None, tensor-model-parallel size: 2, pipeline-model-parallel size: 2" ;;
  esac
  echo "PASS"
  exit 0
fi

if [[ -n ${OWN[$CASE]:-} ]]; then
  IFS='|' read -r layout model <<<"${OWN[$CASE]}"
  read -r np tp layers extra <<<"$layout "
  step "the single process, $layers layers, $model"
  # shellcheck disable=SC2046,SC2086
  assert_succeeds "$TRAIN" $(layout_flags 1 "$layers") $model
  cp "$WORK/out.txt" "$WORK/reference.txt"
  step "$CASE: mpirun -n $np, TP $tp, $extra"
  # shellcheck disable=SC2046,SC2086
  assert_succeeds mpi "$np" $(layout_flags "$tp" "$layers") $model $extra
  compare_losses "$WORK/reference.txt" "$WORK/out.txt" "$CASE"
  echo "PASS"
  exit 0
fi
[[ -n ${MIXED[$CASE]:-} ]] || fail "unknown case '$CASE' (single_process_<layers>, or one of: $("$0" --list | tr '\n' ' '))"
read -r precision np tp layers extra <<<"${MIXED[$CASE]} "
flags=(--"$precision")
[[ $precision == fp16 ]] && flags+=(--initial-loss-scale 1024)
tol=$([[ $precision == bf16 ]] && echo 1.953125e-3 || echo 2.44140625e-4)
step "$precision: the single process, $layers layers"
# shellcheck disable=SC2046
assert_succeeds "$TRAIN" $(layout_flags 1 "$layers") "${flags[@]}"
assert_contains "$WORK/out.txt" "in torch.$([[ $precision == bf16 ]] && echo bfloat16 || echo float16)"
cp "$WORK/out.txt" "$WORK/reference.txt"
step "$CASE: mpirun -n $np, TP $tp, $extra"
# shellcheck disable=SC2046,SC2086
assert_succeeds mpi "$np" $(layout_flags "$tp" "$layers") "${flags[@]}" $extra
compare_losses "$WORK/reference.txt" "$WORK/out.txt" "$CASE" 1 "$tol"
echo "PASS"
