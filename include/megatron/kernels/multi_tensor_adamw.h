// AdamW over many tensors in few launches (apex's multi_tensor_apply pattern): fp32 main weights and
// moments updated in place, grads in fp32/bf16/fp16 scaled by grad_scale first, an optional
// bf16/fp16 copy-out of the updated parameters, decoupled weight decay per tensor, and a found-inf
// flag. Update order is torch.optim.AdamW's (see optim/adamw.h). Raw pointers: no LibTorch here.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "megatron/kernels/adamw_params.h"
#include "megatron/kernels/dtype.h"

namespace megatron::kernels {

// One tensor of the list; all pointers are device pointers to `numel` contiguous elements.
// Vectorised 16-byte access is used for a tensor when param, exp_avg and exp_avg_sq are 16-byte
// aligned, the grad 4-element aligned and the copy 8-byte aligned; otherwise it takes the scalar
// path (correct, slower). numel == 0 tensors are skipped.
struct AdamWTensorArgs {
  float* param = nullptr;        // fp32 main weights, updated in place
  const void* grad = nullptr;    // dtype: the call's grad_dtype
  float* exp_avg = nullptr;      // first moment, fp32
  float* exp_avg_sq = nullptr;   // second moment, fp32
  void* param_copy = nullptr;    // optional: receives the updated param in the call's copy_dtype
  std::int64_t numel = 0;
  bool decay = true;             // apply the call's weight_decay to this tensor (false: biases, 1-D)
};

// One AdamW step over every tensor, on `stream`:
//   g = grad * grad_scale
//   p *= 1 - lr * wd                                   (wd = decay ? weight_decay : 0)
//   m = lerp(m, g, 1 - beta1)
//   v = beta2 * v + (1 - beta2) * g * g
//   p -= (lr / (1 - beta1^step)) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
//   param_copy = p (round to nearest even)             (when param_copy != nullptr)
// grad_dtype is shared by all tensors; copy_dtype (kBFloat16 or kFloat16) by all copies. found_inf
// points to one device int (see InfCheck). Launches are asynchronous; errors of the launch are
// thrown as megatron::Error.
void multi_tensor_adamw(const std::vector<AdamWTensorArgs>& tensors, DType grad_dtype, DType copy_dtype,
                        const AdamWHyperparams& hyper, int* found_inf, InfCheck inf_check,
                        cudaStream_t stream);

// Sets *found_inf = 1 when any grad[i] * grad_scale is non-finite (leaves it untouched otherwise;
// the caller zeroes it, so flags from several calls accumulate). grads[i] has numels[i] elements
// of grad_dtype. Reads each grad once.
void multi_tensor_all_finite(const std::vector<const void*>& grads, const std::vector<std::int64_t>& numels,
                             DType grad_dtype, double grad_scale, int* found_inf, cudaStream_t stream);

}  // namespace megatron::kernels
