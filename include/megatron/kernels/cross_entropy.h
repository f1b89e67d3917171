// Cross entropy from logits on raw device pointers, without materialising a softmax (spec 10.7
// and section 11's cross-entropy fusion). Logits [rows, vocab] hold one vocabulary shard
// [vocab_start, vocab_start + vocab) of a possibly tensor-parallel vocabulary, in fp32, bf16 or
// fp16; all math is fp32. Targets are global token ids (int64); a row whose target equals
// ignore_index gets loss 0 and gradient 0. How shards combine is in aten/cross_entropy_ops.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "megatron/kernels/dtype.h"

namespace megatron::kernels {

// Stage 1 per row, over this shard only: max = max_j x[j]; sum_exp = sum_j exp(x[j] - max);
// target_logit = x[target - vocab_start] when the target lies in the shard (and is not ignored),
// else 0. With loss != nullptr (only meaningful when the shard is the whole vocabulary) also
// loss = log(sum_exp) + max - target_logit, 0 for ignored rows.
struct CrossEntropyFwdParams {
  const void* logits = nullptr;  // [rows, vocab], row stride logits_stride (elements)
  const int64_t* target = nullptr;  // [rows] global ids
  float* max = nullptr;             // [rows]
  float* sum_exp = nullptr;         // [rows]
  float* target_logit = nullptr;    // [rows]
  float* loss = nullptr;            // [rows] or nullptr
  int64_t rows = 0;
  int64_t vocab = 0;
  int64_t logits_stride = 0;
  int64_t vocab_start = 0;
  int64_t ignore_index = -100;
  DType dtype = DType::kFloat32;
};

// Backward per row, over this shard: grad[j] = (exp(x[j] - max) / sum_exp - [j == target -
// vocab_start]) * grad_loss, where max and sum_exp are the row's global (combined) values;
// 0 for ignored rows. grad is written in the logits dtype.
struct CrossEntropyBwdParams {
  const void* logits = nullptr;     // [rows, vocab], row stride logits_stride
  const int64_t* target = nullptr;  // [rows]
  const float* max = nullptr;       // [rows]
  const float* sum_exp = nullptr;   // [rows]
  const float* grad_loss = nullptr;  // [rows], element stride grad_loss_stride (0 broadcasts)
  void* grad = nullptr;              // contiguous [rows, vocab]; may alias logits only if logits_stride == vocab
  int64_t rows = 0;
  int64_t vocab = 0;
  int64_t logits_stride = 0;
  int64_t grad_loss_stride = 1;
  int64_t vocab_start = 0;
  int64_t ignore_index = -100;
  DType dtype = DType::kFloat32;
};

// Launch on `stream`. Throws megatron::Error on invalid parameters or a launch failure.
void launch_cross_entropy_fwd(const CrossEntropyFwdParams& params, cudaStream_t stream);
void launch_cross_entropy_bwd(const CrossEntropyBwdParams& params, cudaStream_t stream);

}  // namespace megatron::kernels
