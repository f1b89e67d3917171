# Mixture-of-experts training helpers for the end-to-end scripts; sourced after mpi_lib.sh.
# shellcheck shell=bash

# A 4-layer GPT whose layers 0 and 2 are MoE layers: 4 experts, top-2, SwiGLU, a shared expert,
# aux and z losses (with layout_flags: fp32, no dropout).
moe=(--num-experts 4 --moe-router-topk 2 --moe-aux-loss-coeff 1e-2 --moe-z-loss-coeff 1e-3 --moe-layer-freq 2
  --moe-ffn-hidden-size 96 --moe-shared-expert-intermediate-size 64 --swiglu --disable-bias-linear)

# compare_all REF FILE WHAT [FIRST]: lm loss, z_loss and load_balancing_loss of iterations
# FIRST..ITERS within 1e-5 of REF's.
compare_all() {
  compare_iterations "$1" "$2" "$3" "${4:-1}" "$ITERS" 1e-5 "lm loss" z_loss load_balancing_loss
}
