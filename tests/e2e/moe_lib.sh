# Mixture-of-experts training helpers for the end-to-end scripts; sourced after mpi_lib.sh.
# shellcheck shell=bash

# A 4-layer GPT whose layers 0 and 2 are MoE layers: 4 experts, top-2, SwiGLU, a shared expert,
# aux and z losses (with layout_flags: fp32, no dropout).
moe=(--num-experts 4 --moe-router-topk 2 --moe-aux-loss-coeff 1e-2 --moe-z-loss-coeff 1e-3 --moe-layer-freq 2
  --moe-ffn-hidden-size 96 --moe-shared-expert-intermediate-size 64 --swiglu --disable-bias-linear --moe-grouped-gemm)

# column FILE NAME: "iteration value" of the iteration lines' NAME field.
column() {
  sed -n "s/.* iteration *\([0-9]*\)\/.* $2: \([0-9.E+-]*\) .*/\1 \2/p" "$1"
}
# compare_all REF FILE WHAT [FIRST]: lm loss, z_loss and load_balancing_loss within 1e-5.
compare_all() {
  local name
  for name in "lm loss" z_loss load_balancing_loss; do
    column "$1" "$name" >"$WORK/ref_col.txt"
    column "$2" "$name" >"$WORK/got_col.txt"
    [[ -s $WORK/got_col.txt ]] || { show "$2" "$3"; fail "$3: no $name values"; }
    awk -v first="${4:-1}" -v what="$3 $name" 'NR == FNR { ref[$1] = $2; next }
      $1 >= first { n++; d = ref[$1] - $2; if (d < 0) d = -d; if (!($1 in ref) || d > 1e-5 * ref[$1]) {
        printf "FAIL: %s: iteration %d: %s, single process %s\n", what, $1, $2, ref[$1] > "/dev/stderr"; exit 1 } }
      END { if (n == 0) { print "FAIL: " what ": nothing compared" > "/dev/stderr"; exit 1 } }' \
      "$WORK/ref_col.txt" "$WORK/got_col.txt" || exit 1
  done
  ok "$3: lm loss, z_loss and load_balancing_loss within 1e-5 of the single process"
}
