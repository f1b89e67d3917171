// Bias + GeLU (Megatron's tanh approximation, fused_bias_gelu.py) and SwiGLU (fused_bias_swiglu.py),
// forward and backward, on row-major arrays through raw pointers on a CUDA stream. One DType for
// every array, fp32 math. The backward writes grad_input only; bias gradients (a row reduction)
// are the caller's (aten/activation_ops.h reduces them in fp32). No LibTorch here.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "megatron/kernels/dtype.h"

namespace megatron::kernels {

// gelu(y) = 0.5 y (1 + tanh(0.79788456 y (1 + 0.044715 y^2))), y = x + bias.
// x, out: [rows, features]; bias: [features] or null.
void bias_gelu_fwd(DType dtype, int64_t rows, int64_t features, const void* x, const void* bias,
                   void* out, cudaStream_t stream);
// grad_input = grad_out * gelu'(x + bias), Megatron's analytic derivative.
void bias_gelu_bwd(DType dtype, int64_t rows, int64_t features, const void* grad_out, const void* x,
                   const void* bias, void* grad_input, cudaStream_t stream);

// y = x + bias split on the last dim into a = y[:, :features], b = y[:, features:];
// out = silu(a) * b. x: [rows, 2*features]; bias: [2*features] or null; out: [rows, features].
void swiglu_fwd(DType dtype, int64_t rows, int64_t features, const void* x, const void* bias,
                void* out, cudaStream_t stream);
// grad_input [rows, 2*features] = [grad_out * b * silu'(a), grad_out * silu(a)].
void swiglu_bwd(DType dtype, int64_t rows, int64_t features, const void* grad_out, const void* x,
                const void* bias, void* grad_input, cudaStream_t stream);

}  // namespace megatron::kernels
