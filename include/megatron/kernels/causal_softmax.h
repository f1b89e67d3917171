// Megatron's scaled upper-triangular (causal) masked softmax on raw device pointers, the CUDA
// half of ScaledUpperTriangMaskedSoftmax (spec section 11). Input [batch*heads, sq, sk] with
// sq == sk, contiguous; position (i, j) with j > i is masked to probability 0. All arithmetic in
// fp32 whatever the element type. The ATen-facing entries are in aten/softmax_ops.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "megatron/kernels/dtype.h"

namespace megatron::kernels {

// Forward: y[r, i, j] = softmax_j(scale * x[r, i, :i+1]) for j <= i, 0 for j > i.
struct CausalSoftmaxFwdParams {
  const void* x = nullptr;  // [batch_heads, sq, sk]
  void* y = nullptr;        // [batch_heads, sq, sk], same dtype; must not alias x
  int64_t batch_heads = 0;
  int64_t sq = 0;
  int64_t sk = 0;
  float scale = 1.0f;
  DType dtype = DType::kFloat32;
  // false forces the path that re-reads the row from global memory instead of caching it in
  // shared memory (the path rows too long for shared memory take); for tests.
  bool cache_row = true;
};

// Backward: dx = scale * y * (dy - sum_j(dy * y)) per row; 0 where masked.
struct CausalSoftmaxBwdParams {
  const void* dy = nullptr;  // [batch_heads, sq, sk]
  const void* y = nullptr;   // forward output, [batch_heads, sq, sk]
  void* dx = nullptr;        // [batch_heads, sq, sk]; may alias dy
  int64_t batch_heads = 0;
  int64_t sq = 0;
  int64_t sk = 0;
  float scale = 1.0f;
  DType dtype = DType::kFloat32;
  bool cache_row = true;
};

// Launch on `stream`; any row length (rows longer than the shared-memory cache re-read global
// memory). Throws megatron::Error on invalid parameters or a launch failure.
void launch_causal_softmax_fwd(const CausalSoftmaxFwdParams& params, cudaStream_t stream);
void launch_causal_softmax_bwd(const CausalSoftmaxBwdParams& params, cudaStream_t stream);

}  // namespace megatron::kernels
