#!/usr/bin/env bash
# A checkpoint resumes in its own layout bit for bit, and in any other layout (model and optimizer
# state resharded on --load, the distributed optimizer's shards re-split) with the single-process
# losses. The checkpoints are the ones layouts_match_single_process.sh saved at iteration 10 of
# its TP2 x DP2 (SP, distributed optimizer, overlap), CP2 x DP2 (distributed optimizer, overlap)
# and TP2 x PP2 runs; each case resumes one at
# iteration 10 and trains to 20:
#   resume_across_layouts.sh <case>     one case of the table below
#   resume_across_layouts.sh --list     "<case> <layout whose checkpoint it loads>" per line
# In the layout that saved it, iterations 11-20 equal the saving run's own, digit for digit; in
# another layout they are within 1e-5 of the single-process run, and a different TP or pipeline
# split says that it reshards.
set -uo pipefail

# case -> "source-layout ranks TP [flags]"; the flags "=" are the source layout's own.
declare -A RESUME=(
  [tp2_dp2_same_layout]="tp2_dp2_sp_distopt_overlap 4 2 ="
  [tp2_dp2_at_dp1]="tp2_dp2_sp_distopt_overlap 2 2 ="
  [tp2_dp2_at_tp1]="tp2_dp2_sp_distopt_overlap 1 1"
  [cp2_dp2_same_layout]="cp2_dp2_distopt_overlap 4 1 ="
  [cp2_dp2_at_cp1]="cp2_dp2_distopt_overlap 1 1"
  [cp2_dp2_at_cp4]="cp2_dp2_distopt_overlap 4 1 --context-parallel-size 4 --use-distributed-optimizer"
  [tp2_pp2_same_layout]="tp2_pp2 4 2 ="
  [tp2_pp2_at_tp1_pp1]="tp2_pp2 1 1"
  [tp2_pp2_at_tp4_pp1]="tp2_pp2 4 4"
  [tp2_pp2_at_tp1_pp4]="tp2_pp2 4 1 --pipeline-model-parallel-size 4"
  [tp2_pp2_at_pp2_virtual2]="tp2_pp2 2 1 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1"
)

if [[ ${1:-} == --list ]]; then
  for name in "${!RESUME[@]}"; do echo "$name ${RESUME[$name]%% *}"; done | sort
  exit 0
fi
CASE=${1:?"usage: $0 --list|CASE"}
[[ -n ${RESUME[$CASE]:-} ]] || { echo "$0: unknown case '$CASE' (see --list)" >&2; exit 2; }
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=mpi_lib.sh
source "$(dirname "$0")/mpi_lib.sh"

read -r source np tp extra <<<"${RESUME[$CASE]} "
read -r source_np source_tp source_layers source_extra <<<"$(bash "$(dirname "$0")/layouts_match_single_process.sh" --describe "$source") "
if [[ ${extra// /} == "=" ]]; then extra=$source_extra; fi
source_pp=$(grep -o 'pipeline-model-parallel-size [0-9]*' <<<"$source_extra" | cut -d' ' -f2)
saved=$LAYOUT_REFERENCES/$source.ckpt
straight=$(shared_log "$source") || exit 1
reference=$(reference_log "$source_layers") || exit 1
[[ -d $saved/iter_0000010 ]] || fail "$saved/iter_0000010 is missing: run 'layouts_match_single_process.sh $source' first"
# The saving run went on to iteration 20 and saved there too: a copy whose tracker names 10.
ckpt=$WORK/ckpt
mkdir -p "$ckpt"
cp -al "$saved/iter_0000010" "$ckpt/" 2>/dev/null || cp -r "$saved/iter_0000010" "$ckpt/"
echo 10 >"$ckpt/latest_checkpointed_iteration.txt"

step "$CASE: the $source checkpoint of iteration 10 on $np ranks, TP $tp, $extra"
# shellcheck disable=SC2046,SC2086
assert_succeeds mpi "$np" $(layout_flags "$tp" "$source_layers") $extra --load "$ckpt"
assert_contains "$WORK/out.txt" "successfully loaded checkpoint from $ckpt"
# shellcheck disable=SC2086  # the flag lists compared word by word
if [[ $np-$tp-$(echo $extra) == "$source_np-$source_tp-$(echo $source_extra)" ]]; then
  losses "$WORK/out.txt" >"$WORK/resumed.txt"
  losses "$straight" | awk '$1 > 10' >"$WORK/straight.txt"
  [[ -s $WORK/resumed.txt ]] || { show "$WORK/out.txt" stdout; fail "no iteration after the resume"; }
  cmp -s "$WORK/resumed.txt" "$WORK/straight.txt" ||
    { diff "$WORK/straight.txt" "$WORK/resumed.txt" >&2; fail "the resumed run's losses differ from the saving run's"; }
  ok "iterations 11-$ITERS identical to the run that saved the checkpoint"
else
  if [[ $tp != "$source_tp" || -n $source_pp ]]; then  # another TP size or another layer split
    assert_contains "$WORK/out.txt" \
      "resharding checkpoint $ckpt/iter_0000010 from tensor-model-parallel size $source_tp x pipeline-model-parallel size ${source_pp:-1}"
  fi
  compare_losses "$reference" "$WORK/out.txt" "$CASE (resumed at iteration 10)" 11
fi
echo "PASS"
