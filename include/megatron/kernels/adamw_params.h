// The hyperparameters of one AdamW step and the found-inf modes, shared by the CUDA launcher
// (multi_tensor_adamw.h) and the ATen-facing entry (aten/adamw_ops.h); no CUDA headers here, so
// the entry builds without the CUDA toolkit.
#pragma once

#include <cstdint>

namespace megatron::kernels {

// What found_inf does in a launch.
enum class InfCheck {
  kNone,        // found_inf unused (may be null); grads assumed finite
  kReport,      // single pass: update everything and set *found_inf = 1 when a scaled grad is
                // non-finite. The parameters and moments of such a step hold NaN/Inf afterwards:
                // use only when the caller discards the state on overflow (or for diagnostics)
  kSkipIfSet,   // every block returns without writing when *found_inf != 0 at launch. The flag
                // must be final before the launch: run multi_tensor_all_finite first on the same
                // stream (two passes: check, then update-or-skip). The flag is not written.
};

struct AdamWHyperparams {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;   // decoupled: p *= 1 - lr * weight_decay for tensors with decay
  std::int64_t step = 1;       // the step being taken, 1-based (bias corrections 1 - beta^step)
  double grad_scale = 1.0;     // grads are multiplied by this first: clip coefficient / (1/loss scale)
};

}  // namespace megatron::kernels
