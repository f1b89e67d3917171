// The fused ops the model and the optimizer use, as differentiable functions (autograd nodes with
// hand-written forward and backward): each runs the CUDA kernel on CUDA tensors of float32,
// bfloat16 or float16 in a build with the kernels, and the op's ATen reference everywhere else
// (CPU tensors, other dtypes, shapes a kernel does not handle). One entry per op on every device,
// so CPU runs go through the same functions as GPU runs; tests compare each with the plain-ATen
// composition it replaces. Math is fp32 inside; outputs take the input's dtype.
#pragma once

#include <ATen/ATen.h>

#include <utility>

namespace megatron::kernels::ops {

// LayerNorm over the last dim: (x - mean) / sqrt(var + eps) * weight + bias (bias may be undefined).
at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps);
// RMSNorm over the last dim: x / sqrt(mean(x^2) + eps) * weight.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// The norm with the residual add fused in front: sum = x + residual (in x's dtype), returns
// (norm(sum), sum). bias undefined for RMSNorm or a LayerNorm without bias. The transformer layer
// uses it for "h = residual + branch; y = norm(h)".
std::pair<at::Tensor, at::Tensor> layer_norm_residual(const at::Tensor& x, const at::Tensor& residual,
                                                      const at::Tensor& weight, const at::Tensor& bias, double eps);
std::pair<at::Tensor, at::Tensor> rms_norm_residual(const at::Tensor& x, const at::Tensor& residual,
                                                    const at::Tensor& weight, double eps);

// Megatron's fused bias-GeLU: y = x + bias; 0.5 y (1 + tanh(0.79788456 y (1 + 0.044715 y^2))), the
// tanh approximation (bias may be undefined). Unfused Megatron uses the exact erf GeLU instead.
at::Tensor bias_gelu(const at::Tensor& x, const at::Tensor& bias);
// Fused bias-SwiGLU: y = x + bias (bias may be undefined); silu(y[..., :F]) * y[..., F:] for x [..., 2F].
at::Tensor bias_swiglu(const at::Tensor& x, const at::Tensor& bias);

// Rotary embedding (spec 10.4) of t [s, b, heads, hn] with angles freqs [>= s, rot_dim] (fp32, see
// rope_freqs in aten/rope_ops.h); the channels past rot_dim pass through. Returns a contiguous tensor.
at::Tensor rope(const at::Tensor& t, const at::Tensor& freqs, bool interleaved);

// Megatron's ScaledUpperTriangMaskedSoftmax: softmax over the last dim of scale * x with keys after
// the query masked, for scores x [batch*heads, s, s]; fp32 inside, x's dtype out.
at::Tensor causal_softmax(const at::Tensor& x, double scale);

// Per-row cross entropy of logits [..., V] (any float dtype) against target [...] (int64 ids), fp32
// out, shaped like target; ignore_index rows give 0. The whole vocabulary on one rank (the
// vocab-parallel form is parallel::vocab_parallel_cross_entropy, which uses the same kernels).
at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& target, int64_t ignore_index = -100);

// at::linear (x @ weight^T + bias, bias may be undefined) and at::matmul, differentiable. Float16
// CPU tensors are multiplied in fp32 and the product rounded back to fp16 (the backward's
// products likewise, through the casts' gradients): LibTorch's CPU float16 GEMM has no fast path
// on CPUs without fp16 arithmetic and ran 6-16x slower than this (bench_matmul_fp16), and fp32
// accumulation of fp16 inputs is what the GPU's fp16 GEMM does too. Everything else is ATen's op.
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {});
at::Tensor matmul(const at::Tensor& a, const at::Tensor& b);
// at::_grouped_mm (x [N, in] in groups of rows ending at `offsets`, int32, times b [groups, in,
// out]) with the same rule for fp16 on the CPU (ATen's fp16 forward + backward: 14x slower there).
at::Tensor grouped_mm(const at::Tensor& x, const at::Tensor& b, const at::Tensor& offsets);

}  // namespace megatron::kernels::ops
