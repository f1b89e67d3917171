// ATen-facing LayerNorm / RMSNorm: validation, output allocation, the current stream, and the
// fallback to the plain references (also defined here) for CPU tensors, builds without the CUDA
// kernels and hidden sizes the kernels do not handle. An fp32 LayerNorm off the kernel path (CPU
// ranks) takes ATen's fused native_layer_norm instead of the reference: one pass over the rows
// each way instead of about ten.
#include "megatron/kernels/aten/norm_ops.h"

#include <vector>

#include "checks.h"
#include "megatron/core/check.h"
#include "megatron/kernels/norm_kind.h"
#if MEGATRON_CUDA_KERNELS
#include "megatron/kernels/norms.h"
#endif

namespace megatron::kernels::aten {
namespace {

using aten_detail::check_tensor;

[[maybe_unused]] DType kernel_dtype(const char* op, const char* name, const at::Tensor& t) {
  return aten_detail::require_kernel_dtype(op, name, t.scalar_type());
}

[[maybe_unused]] void check_vector(const char* op, const char* name, const at::Tensor& t, const at::Tensor& x, int64_t hidden) {
  check_tensor(op, name, t, x);
  MEGATRON_CHECK(t.dim() == 1 && t.size(0) == hidden, op, ": ", name, " has shape ", t.sizes(),
                 "; expected [", hidden, "] (the last dim of x)");
}

[[maybe_unused]] void check_same_shape(const char* op, const char* name, const at::Tensor& t, const at::Tensor& x) {
  check_tensor(op, name, t, x);
  MEGATRON_CHECK(t.sizes() == x.sizes(), op, ": ", name, " has shape ", t.sizes(), " but x has ", x.sizes());
}

[[maybe_unused]] void check_stats(const char* op, const char* name, const at::Tensor& t, const at::Tensor& x, int64_t rows) {
  MEGATRON_CHECK(t.defined() && t.is_cuda() && t.device() == x.device(), op, ": ", name,
                 " must be a CUDA tensor on ", x.device());
  MEGATRON_CHECK(t.scalar_type() == at::kFloat && t.is_contiguous() && t.numel() == rows, op, ": ", name,
                 " must be a contiguous float32 tensor of ", rows, " elements (one per row), got ", t.scalar_type(),
                 " ", t.sizes());
}

[[maybe_unused]] void check_x(const char* op, const at::Tensor& x) {
  MEGATRON_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) > 0, op, ": x must have a non-empty last dim");
  kernel_dtype(op, "x", x);
  check_tensor(op, "x", x, x);
}

NormOutputs norm_reference(NormKind kind, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                           double eps, const at::Tensor& residual) {
  const int64_t hidden = x.size(-1);
  const at::Tensor sum = residual.defined() ? x + residual : x;  // rounded to x's dtype, as the kernel
  const at::Tensor s = sum.reshape({-1, hidden}).to(at::kFloat);
  NormOutputs o;
  at::Tensor centered = s;
  if (kind == NormKind::kLayerNorm) {
    o.mean = s.mean({1});
    centered = s - o.mean.unsqueeze(1);
  }
  o.rstd = at::rsqrt(centered.square().mean({1}) + eps);
  at::Tensor y = centered * o.rstd.unsqueeze(1) * weight.to(at::kFloat);
  if (bias.defined()) y = y + bias.to(at::kFloat);
  o.out = y.to(x.scalar_type()).reshape(x.sizes());
  if (residual.defined()) o.residual_out = sum;
  return o;
}

NormGrads norm_bwd_reference(NormKind kind, const at::Tensor& grad_out, const at::Tensor& input,
                             const at::Tensor& weight, const at::Tensor& mean, const at::Tensor& rstd, bool has_bias,
                             const at::Tensor& grad_residual_out) {
  const int64_t hidden = input.size(-1);
  const at::Tensor dy = grad_out.reshape({-1, hidden}).to(at::kFloat);
  const at::Tensor s = input.reshape({-1, hidden}).to(at::kFloat);
  const at::Tensor r = rstd.reshape({-1, 1}).to(at::kFloat);
  const at::Tensor x_hat = kind == NormKind::kLayerNorm ? (s - mean.reshape({-1, 1}).to(at::kFloat)) * r : s * r;
  const at::Tensor g = dy * weight.to(at::kFloat);
  at::Tensor inner = g - x_hat * (g * x_hat).mean({1}, /*keepdim=*/true);
  if (kind == NormKind::kLayerNorm) inner = inner - g.mean({1}, /*keepdim=*/true);
  at::Tensor dx = r * inner;
  if (grad_residual_out.defined()) dx = dx + grad_residual_out.reshape({-1, hidden}).to(at::kFloat);
  NormGrads out;
  out.grad_input = dx.to(input.scalar_type()).reshape(input.sizes());
  out.grad_weight = (dy * x_hat).sum({0}).to(weight.scalar_type());
  if (has_bias) out.grad_bias = dy.sum({0}).to(weight.scalar_type());
  return out;
}

bool fused_aten_layer_norm(NormKind kind, const at::Tensor& x, const at::Tensor& weight) {
  return kind == NormKind::kLayerNorm && x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat;
}

std::vector<int64_t> stats_shape(const at::Tensor& x) {  // native_layer_norm's [..., 1]
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = 1;
  return shape;
}

NormOutputs aten_layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps,
                            const at::Tensor& residual) {
  const at::Tensor sum = residual.defined() ? x + residual : x;
  auto [out, mean, rstd] = at::native_layer_norm(sum, {x.size(-1)}, weight, bias, eps);
  return {out, residual.defined() ? sum : at::Tensor(), mean.reshape({-1}), rstd.reshape({-1})};
}

NormGrads aten_layer_norm_bwd(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
                              const at::Tensor& mean, const at::Tensor& rstd, bool has_bias,
                              const at::Tensor& grad_residual_out) {
  const std::vector<int64_t> shape = stats_shape(input);
  // The bias itself is not needed: ATen reads it only for the shape and dtype of its gradient,
  // which are the weight's.
  auto [dx, dw, db] = at::native_layer_norm_backward(grad_out, input, {input.size(-1)}, mean.view(shape),
                                                     rstd.view(shape), weight, has_bias ? weight : at::Tensor(),
                                                     {true, true, has_bias});
  if (grad_residual_out.defined()) dx.add_(grad_residual_out);
  return {dx, dw, db};
}

NormOutputs norm_fwd_entry(NormKind kind, const char* op, const at::Tensor& x, const at::Tensor& weight,
                           const at::Tensor& bias, double eps, const at::Tensor& residual) {
  if (!aten_detail::on_kernel_path(x)) {
    return fused_aten_layer_norm(kind, x, weight) ? aten_layer_norm(x, weight, bias, eps, residual)
                                                  : norm_reference(kind, x, weight, bias, eps, residual);
  }
#if MEGATRON_CUDA_KERNELS
  check_x(op, x);
  const int64_t hidden = x.size(-1);
  check_vector(op, "weight", weight, x, hidden);
  if (bias.defined()) check_vector(op, "bias", bias, x, hidden);
  if (residual.defined()) check_same_shape(op, "residual", residual, x);
  MEGATRON_CHECK(eps >= 0.0, op, ": eps = ", eps, " must be >= 0");
  const DType dtype = kernel_dtype(op, "x", x);
  const c10::cuda::CUDAGuard guard(x.device());
  if (!norm_fwd_supported(kind, dtype, hidden)) {
    return kind == NormKind::kRmsNorm ? rms_norm_reference(x, weight, eps, residual)
                                      : layer_norm_reference(x, weight, bias, eps, residual);
  }
  const int64_t rows = x.numel() / hidden;
  const auto stats_options = x.options().dtype(at::kFloat);
  NormOutputs o;
  o.out = at::empty_like(x);
  if (residual.defined()) o.residual_out = at::empty_like(x);
  if (kind == NormKind::kLayerNorm) o.mean = at::empty({rows}, stats_options);
  o.rstd = at::empty({rows}, stats_options);
  NormFwdArgs a;
  a.kind = kind;
  a.dtype = dtype;
  a.rows = rows;
  a.hidden = hidden;
  a.x = x.data_ptr();
  a.residual = residual.defined() ? residual.data_ptr() : nullptr;
  a.weight = weight.data_ptr();
  a.bias = bias.defined() ? bias.data_ptr() : nullptr;
  a.out = o.out.data_ptr();
  a.residual_out = residual.defined() ? o.residual_out.data_ptr() : nullptr;
  a.mean = o.mean.defined() ? o.mean.data_ptr<float>() : nullptr;
  a.rstd = o.rstd.data_ptr<float>();
  a.eps = static_cast<float>(eps);
  norm_fwd(a, at::cuda::getCurrentCUDAStream().stream());
  return o;
#else
  MEGATRON_FAIL("internal error: no CUDA kernels in this build");
#endif
}

NormGrads norm_bwd_entry(NormKind kind, const char* op, const at::Tensor& grad_out, const at::Tensor& input,
                         const at::Tensor& weight, const at::Tensor& mean, const at::Tensor& rstd, bool has_bias,
                         const at::Tensor& grad_residual_out) {
  if (!aten_detail::on_kernel_path(input)) {
    return fused_aten_layer_norm(kind, input, weight)
               ? aten_layer_norm_bwd(grad_out, input, weight, mean, rstd, has_bias, grad_residual_out)
               : norm_bwd_reference(kind, grad_out, input, weight, mean, rstd, has_bias, grad_residual_out);
  }
#if MEGATRON_CUDA_KERNELS
  check_x(op, input);
  const int64_t hidden = input.size(-1);
  const int64_t rows = input.numel() / hidden;
  check_same_shape(op, "grad_out", grad_out, input);
  check_vector(op, "weight", weight, input, hidden);
  if (kind == NormKind::kLayerNorm) check_stats(op, "mean", mean, input, rows);
  check_stats(op, "rstd", rstd, input, rows);
  if (grad_residual_out.defined()) check_same_shape(op, "grad_residual_out", grad_residual_out, input);
  const DType dtype = kernel_dtype(op, "input", input);
  const c10::cuda::CUDAGuard guard(input.device());
  if (!norm_bwd_supported(kind, dtype, hidden, has_bias)) {
    return kind == NormKind::kRmsNorm
               ? rms_norm_bwd_reference(grad_out, input, weight, rstd, grad_residual_out)
               : layer_norm_bwd_reference(grad_out, input, weight, mean, rstd, has_bias, grad_residual_out);
  }
  NormGrads g;
  g.grad_input = at::empty_like(input);
  g.grad_weight = at::empty_like(weight);
  if (has_bias) g.grad_bias = at::empty_like(weight);
  const int64_t ws_floats = norm_bwd_workspace_floats(dtype, rows, hidden, has_bias);
  const at::Tensor workspace = at::empty({ws_floats}, input.options().dtype(at::kFloat));
  NormBwdArgs a;
  a.kind = kind;
  a.dtype = dtype;
  a.rows = rows;
  a.hidden = hidden;
  a.grad_out = grad_out.data_ptr();
  a.input = input.data_ptr();
  a.weight = weight.data_ptr();
  a.mean = kind == NormKind::kLayerNorm ? mean.data_ptr<float>() : nullptr;
  a.rstd = rstd.data_ptr<float>();
  a.grad_residual_out = grad_residual_out.defined() ? grad_residual_out.data_ptr() : nullptr;
  a.grad_input = g.grad_input.data_ptr();
  a.grad_weight = g.grad_weight.data_ptr();
  a.grad_bias = has_bias ? g.grad_bias.data_ptr() : nullptr;
  a.workspace = workspace.data_ptr<float>();
  a.workspace_floats = ws_floats;
  norm_bwd(a, at::cuda::getCurrentCUDAStream().stream());
  return g;
#else
  MEGATRON_FAIL("internal error: no CUDA kernels in this build");
#endif
}

}  // namespace

NormOutputs layer_norm_fwd(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps,
                           const at::Tensor& residual) {
  return norm_fwd_entry(NormKind::kLayerNorm, "layer_norm_fwd", x, weight, bias, eps, residual);
}

NormGrads layer_norm_bwd(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
                         const at::Tensor& mean, const at::Tensor& rstd, bool has_bias,
                         const at::Tensor& grad_residual_out) {
  return norm_bwd_entry(NormKind::kLayerNorm, "layer_norm_bwd", grad_out, input, weight, mean, rstd, has_bias,
                        grad_residual_out);
}

NormOutputs rms_norm_fwd(const at::Tensor& x, const at::Tensor& weight, double eps, const at::Tensor& residual) {
  return norm_fwd_entry(NormKind::kRmsNorm, "rms_norm_fwd", x, weight, at::Tensor(), eps, residual);
}

NormGrads rms_norm_bwd(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
                       const at::Tensor& rstd, const at::Tensor& grad_residual_out) {
  return norm_bwd_entry(NormKind::kRmsNorm, "rms_norm_bwd", grad_out, input, weight, at::Tensor(), rstd, false,
                        grad_residual_out);
}

NormOutputs layer_norm_reference(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps,
                                 const at::Tensor& residual) {
  return norm_reference(NormKind::kLayerNorm, x, weight, bias, eps, residual);
}

NormGrads layer_norm_bwd_reference(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
                                   const at::Tensor& mean, const at::Tensor& rstd, bool has_bias,
                                   const at::Tensor& grad_residual_out) {
  return norm_bwd_reference(NormKind::kLayerNorm, grad_out, input, weight, mean, rstd, has_bias, grad_residual_out);
}

NormOutputs rms_norm_reference(const at::Tensor& x, const at::Tensor& weight, double eps,
                               const at::Tensor& residual) {
  return norm_reference(NormKind::kRmsNorm, x, weight, at::Tensor(), eps, residual);
}

NormGrads rms_norm_bwd_reference(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
                                 const at::Tensor& rstd, const at::Tensor& grad_residual_out) {
  return norm_bwd_reference(NormKind::kRmsNorm, grad_out, input, weight, at::Tensor(), rstd, false,
                            grad_residual_out);
}

}  // namespace megatron::kernels::aten
