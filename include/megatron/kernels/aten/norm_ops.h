// Tensor-facing LayerNorm / RMSNorm (norms.h kernels) and their plain ATen references. The entries
// take contiguous CUDA tensors of float32, bfloat16 or float16 normalised over the last dim, run on
// the current CUDA stream, and fall back to the reference for hidden sizes the kernels do not
// handle. The references run on CPU or CUDA, computing in fp32 and rounding outputs to x's dtype;
// an fp32 LayerNorm off the kernel path (CPU ranks) runs ATen's fused native_layer_norm instead.
#pragma once

#include <ATen/ATen.h>

namespace megatron::kernels::aten {

struct NormOutputs {
  at::Tensor out;           // shaped like x, x's dtype
  at::Tensor residual_out;  // x + residual in x's dtype (what was normalised); undefined without residual
  at::Tensor mean;          // [rows] fp32, rows = x.numel() / hidden; undefined for RMSNorm
  at::Tensor rstd;          // [rows] fp32
};

struct NormGrads {
  at::Tensor grad_input;   // shaped like input; also the residual's gradient in the fused variant
  at::Tensor grad_weight;  // [hidden], weight's dtype, reduced over rows in fp32
  at::Tensor grad_bias;    // [hidden]; undefined when there is no bias
};

// out = LayerNorm(x + residual) * weight + bias; residual and bias may be undefined tensors.
NormOutputs layer_norm_fwd(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps,
                           const at::Tensor& residual = {});
// input: what the forward normalised (x, or its residual_out); mean/rstd from the forward.
// grad_residual_out: gradient reaching residual_out through its other use, or undefined.
NormGrads layer_norm_bwd(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
                         const at::Tensor& mean, const at::Tensor& rstd, bool has_bias,
                         const at::Tensor& grad_residual_out = {});

// out = (x + residual) * rsqrt(mean((x + residual)^2) + eps) * weight.
NormOutputs rms_norm_fwd(const at::Tensor& x, const at::Tensor& weight, double eps, const at::Tensor& residual = {});
NormGrads rms_norm_bwd(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
                       const at::Tensor& rstd, const at::Tensor& grad_residual_out = {});

// References: same contracts, plain at:: ops, any device.
NormOutputs layer_norm_reference(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps,
                                 const at::Tensor& residual = {});
NormGrads layer_norm_bwd_reference(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
                                   const at::Tensor& mean, const at::Tensor& rstd, bool has_bias,
                                   const at::Tensor& grad_residual_out = {});
NormOutputs rms_norm_reference(const at::Tensor& x, const at::Tensor& weight, double eps,
                               const at::Tensor& residual = {});
NormGrads rms_norm_bwd_reference(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
                                 const at::Tensor& rstd, const at::Tensor& grad_residual_out = {});

}  // namespace megatron::kernels::aten
