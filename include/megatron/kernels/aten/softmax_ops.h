// ATen-facing scaled causal (upper-triangular) masked softmax, Megatron's
// ScaledUpperTriangMaskedSoftmax: the CUDA kernel for fp32/bf16/fp16 CUDA tensors; otherwise ATen's
// fused softmax and softmax backward for fp32 (CPU ranks), the plain ATen reference for the rest.
#pragma once

#include <ATen/ATen.h>

namespace megatron::kernels {

// x [batch*heads, sq, sk] with sq == sk -> y of the same shape and dtype: softmax over the last
// dim of scale * x with positions j > i masked to probability 0. Math in fp32.
at::Tensor causal_softmax_forward(const at::Tensor& x, double scale);

// dy, y [batch*heads, sq, sk] -> dx = scale * y * (dy - sum_j(dy * y)), dtype of dy.
at::Tensor causal_softmax_backward(const at::Tensor& dy, const at::Tensor& y, double scale);

// Plain ATen references, computed in fp32 and returned in the input dtype; any device.
at::Tensor causal_softmax_forward_reference(const at::Tensor& x, double scale);
at::Tensor causal_softmax_backward_reference(const at::Tensor& dy, const at::Tensor& y, double scale);

}  // namespace megatron::kernels
