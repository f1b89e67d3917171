// LayerNorm and RMSNorm over the last dimension of a [rows, hidden] row-major array, forward and
// backward, optionally fused with the residual add (out = norm(x + residual), the sum returned for
// the next residual). Raw-pointer API on a CUDA stream; x, residual, weight, bias and every output
// share one DType, all statistics and reductions are fp32. No LibTorch here (aten/norm_ops.h is
// the tensor-facing layer). Not handled: zero-centred gamma ("layernorm_1p"), mixed-dtype weights.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "megatron/kernels/dtype.h"
#include "megatron/kernels/norm_kind.h"

namespace megatron::kernels {

struct NormFwdArgs {
  NormKind kind = NormKind::kLayerNorm;
  DType dtype = DType::kFloat32;
  int64_t rows = 0;
  int64_t hidden = 0;
  const void* x = nullptr;         // [rows, hidden]
  const void* residual = nullptr;  // [rows, hidden] or null (no residual add)
  const void* weight = nullptr;    // [hidden]
  const void* bias = nullptr;      // [hidden] or null; must be null for RMSNorm
  void* out = nullptr;             // [rows, hidden]
  void* residual_out = nullptr;    // [rows, hidden] x + residual (rounded to dtype); needed iff residual
  float* mean = nullptr;           // [rows] or null; LayerNorm only
  float* rstd = nullptr;           // [rows] or null; 1/sqrt(var + eps), var about the mean (LN) or 0 (RMS)
  float eps = 1e-5f;
};

struct NormBwdArgs {
  NormKind kind = NormKind::kLayerNorm;
  DType dtype = DType::kFloat32;
  int64_t rows = 0;
  int64_t hidden = 0;
  const void* grad_out = nullptr;           // [rows, hidden]
  const void* input = nullptr;              // [rows, hidden] what was normalised (x, or x + residual)
  const void* weight = nullptr;             // [hidden]
  const float* mean = nullptr;              // [rows], LayerNorm only
  const float* rstd = nullptr;              // [rows]
  const void* grad_residual_out = nullptr;  // [rows, hidden] or null: gradient reaching x + residual
                                            // through its other use, added to grad_input
  void* grad_input = nullptr;               // [rows, hidden] (also the residual's gradient)
  void* grad_weight = nullptr;              // [hidden]
  void* grad_bias = nullptr;                // [hidden] or null (LayerNorm without bias, RMSNorm)
  float* workspace = nullptr;               // norm_bwd_workspace_floats(...) floats
  int64_t workspace_floats = 0;
};

// Whether the kernels handle `hidden` for this dtype on the current device (shared memory holds a
// row in the forward and fp32 per-column accumulators in the backward; >= 16384 on sm_80/sm_90).
// Callers fall back to a reference where this is false.
bool norm_fwd_supported(NormKind kind, DType dtype, int64_t hidden);
bool norm_bwd_supported(NormKind kind, DType dtype, int64_t hidden, bool has_bias);

// fp32 scratch the backward needs for its per-block weight/bias partial sums, on the current device.
int64_t norm_bwd_workspace_floats(DType dtype, int64_t rows, int64_t hidden, bool has_bias);

// Launch on `stream`. Throw megatron::Error on unsupported arguments or a CUDA launch failure.
void norm_fwd(const NormFwdArgs& args, cudaStream_t stream);
void norm_bwd(const NormBwdArgs& args, cudaStream_t stream);

}  // namespace megatron::kernels
