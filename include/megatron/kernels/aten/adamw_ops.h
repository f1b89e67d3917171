// ATen-facing multi-tensor AdamW (kernels/multi_tensor_adamw.cu) over lists of tensors, and its
// plain ATen reference (per-tensor ATen ops, torch.optim.AdamW's order; also runs on CPU), which is
// the fallback and the parity oracle. Both update params, exp_avgs and exp_avg_sqs in place.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "megatron/kernels/adamw_params.h"

namespace megatron::kernels::aten {

// The lists of one AdamW step. params, exp_avgs, exp_avg_sqs: fp32, contiguous; grads: one dtype
// (fp32, bf16 or fp16) for the whole list, contiguous; param_copies: empty, or one entry per param
// (an undefined entry means no copy for that tensor), one dtype (bf16 or fp16) for the whole list;
// decays: empty (every tensor decays) or one flag per param. Entry i of every list has the same
// number of elements.
struct AdamWLists {
  std::vector<at::Tensor> params;
  std::vector<at::Tensor> grads;
  std::vector<at::Tensor> exp_avgs;
  std::vector<at::Tensor> exp_avg_sqs;
  std::vector<at::Tensor> param_copies;
  std::vector<bool> decays;
};

// One fused AdamW step (see multi_tensor_adamw.h for the formula) on the current CUDA stream. All
// tensors on one CUDA device. found_inf: undefined, or an int32 tensor of one element on that
// device. When given, the step runs in two passes: the grads' all-finite check ORs into found_inf
// (the caller zeroes it beforehand, so it may already hold an overflow found elsewhere), then the
// update runs only if found_inf is 0 (the skip is decided on the device: no host sync). Throws
// megatron::Error naming the list and index of the first offending tensor.
void multi_tensor_adamw_(const AdamWLists& lists, const AdamWHyperparams& hyper, const at::Tensor& found_inf = {});

// found_inf |= any(!isfinite(grad * grad_scale)) over the list, on the current stream (CUDA).
void multi_tensor_all_finite_(const std::vector<at::Tensor>& grads, double grad_scale, const at::Tensor& found_inf);

// The step the optimizer takes: the fused kernel for CUDA lists in a build with the kernels, the
// reference below otherwise (CPU tensors).
void adamw_step_(const AdamWLists& lists, const AdamWHyperparams& hyper, const at::Tensor& found_inf = {});

// The same step with per-tensor ATen ops, on any device (CPU included), with the same contract; the
// skip reads found_inf on the host (a sync on CUDA).
void multi_tensor_adamw_reference_(const AdamWLists& lists, const AdamWHyperparams& hyper,
                                   const at::Tensor& found_inf = {});

}  // namespace megatron::kernels::aten
