// Tensor-facing bias + GeLU (tanh) and SwiGLU (activations.h kernels) and their plain ATen
// references. Entries take contiguous CUDA tensors of float32, bfloat16 or float16 and run on the
// current stream; bias gradients are the row sums of grad_input, reduced in fp32. References run
// on CPU or CUDA in fp32 math, rounding to the input's dtype; an fp32 GeLU off the kernel path (CPU
// ranks) runs ATen's fused gelu(tanh) and gelu_backward instead.
#pragma once

#include <ATen/ATen.h>

namespace megatron::kernels::aten {

struct ActivationGrads {
  at::Tensor grad_input;  // shaped like x
  at::Tensor grad_bias;   // shaped like bias; undefined without bias
};

// x: [..., F]; bias: [F] or undefined. out = gelu_tanh(x + bias), Megatron's constants.
at::Tensor bias_gelu_fwd(const at::Tensor& x, const at::Tensor& bias = {});
ActivationGrads bias_gelu_bwd(const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& bias = {});

// x: [..., 2F]; bias: [2F] or undefined. y = x + bias; out [..., F] = silu(y[..., :F]) * y[..., F:].
at::Tensor swiglu_fwd(const at::Tensor& x, const at::Tensor& bias = {});
ActivationGrads swiglu_bwd(const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& bias = {});

at::Tensor bias_gelu_reference(const at::Tensor& x, const at::Tensor& bias = {});
ActivationGrads bias_gelu_bwd_reference(const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& bias = {});
at::Tensor swiglu_reference(const at::Tensor& x, const at::Tensor& bias = {});
ActivationGrads swiglu_bwd_reference(const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& bias = {});

}  // namespace megatron::kernels::aten
