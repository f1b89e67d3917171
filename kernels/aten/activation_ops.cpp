// ATen-facing bias + GeLU and SwiGLU: validation, output allocation, the current stream, the fp32
// bias-gradient reduction, and the plain ATen references (the path of CPU tensors and of builds
// without the CUDA kernels). fp32 GeLU off the kernel path (CPU ranks) takes ATen's fused tanh
// GeLU and its backward, the same formula (Megatron's constants are sqrt(2/pi) and 0.044715 to
// fp32 precision) in one pass instead of about ten.
#include "megatron/kernels/aten/activation_ops.h"

#include "checks.h"
#include "megatron/core/check.h"
#if MEGATRON_CUDA_KERNELS
#include "megatron/kernels/activations.h"
#endif

namespace megatron::kernels::aten {
namespace {

using aten_detail::check_tensor;

[[maybe_unused]] DType kernel_dtype(const char* op, const at::Tensor& x) { return aten_detail::require_kernel_dtype(op, "x", x.scalar_type()); }

// Validates x (and bias, grad_out when given); returns the last-dim width of x.
[[maybe_unused]] int64_t check_inputs(const char* op, const at::Tensor& x, const at::Tensor& bias, bool split_halves) {
  MEGATRON_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) > 0, op, ": x must have a non-empty last dim");
  kernel_dtype(op, x);
  check_tensor(op, "x", x, x);
  const int64_t width = x.size(-1);
  MEGATRON_CHECK(!split_halves || width % 2 == 0, op, ": the last dim of x (", width,
                 ") must be even: it holds the two halves");
  if (bias.defined()) {
    check_tensor(op, "bias", bias, x);
    MEGATRON_CHECK(bias.dim() == 1 && bias.size(0) == width, op, ": bias has shape ", bias.sizes(), "; expected [",
                   width, "] (the last dim of x)");
  }
  return width;
}

[[maybe_unused]] void check_grad_out(const char* op, const at::Tensor& grad_out, const at::Tensor& x, int64_t out_width) {
  check_tensor(op, "grad_out", grad_out, x);
  std::vector<int64_t> expected = x.sizes().vec();
  expected.back() = out_width;
  MEGATRON_CHECK(grad_out.sizes() == at::IntArrayRef(expected), op, ": grad_out has shape ", grad_out.sizes(),
                 "; expected ", at::IntArrayRef(expected));
}

at::Tensor with_bias(const at::Tensor& x, const at::Tensor& bias) {
  const at::Tensor y = x.to(at::kFloat);
  return bias.defined() ? y + bias.to(at::kFloat) : y;
}

// Row sum of grad_input in fp32, in bias's dtype.
at::Tensor bias_grad(const at::Tensor& grad_input, const at::Tensor& bias) {
  if (!bias.defined()) return {};
  return grad_input.reshape({-1, bias.size(0)}).sum({0}, /*keepdim=*/false, at::kFloat).to(bias.scalar_type());
}

bool fused_aten_gelu(const at::Tensor& x, const at::Tensor& bias) {
  return x.scalar_type() == at::kFloat && (!bias.defined() || bias.scalar_type() == at::kFloat);
}

}  // namespace

at::Tensor bias_gelu_fwd(const at::Tensor& x, const at::Tensor& bias) {
  if (!aten_detail::on_kernel_path(x)) {
    if (!fused_aten_gelu(x, bias)) return bias_gelu_reference(x, bias);
    if (!bias.defined()) return at::gelu(x, "tanh");
    at::Tensor y = x + bias;
    return at::gelu_(y, "tanh");
  }
#if MEGATRON_CUDA_KERNELS
  const int64_t width = check_inputs("bias_gelu_fwd", x, bias, false);
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor out = at::empty_like(x);
  kernels::bias_gelu_fwd(kernel_dtype("bias_gelu_fwd", x), x.numel() / width, width, x.data_ptr(),
                         bias.defined() ? bias.data_ptr() : nullptr, out.data_ptr(),
                         at::cuda::getCurrentCUDAStream().stream());
  return out;
#else
  MEGATRON_FAIL("internal error: no CUDA kernels in this build");
#endif
}

ActivationGrads bias_gelu_bwd(const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& bias) {
  if (!aten_detail::on_kernel_path(x)) {
    if (!fused_aten_gelu(x, bias) || grad_out.scalar_type() != at::kFloat) {
      return bias_gelu_bwd_reference(grad_out, x, bias);
    }
    ActivationGrads g;
    g.grad_input = at::gelu_backward(grad_out, bias.defined() ? x + bias : x, "tanh");
    g.grad_bias = bias_grad(g.grad_input, bias);
    return g;
  }
#if MEGATRON_CUDA_KERNELS
  const int64_t width = check_inputs("bias_gelu_bwd", x, bias, false);
  check_grad_out("bias_gelu_bwd", grad_out, x, width);
  const c10::cuda::CUDAGuard guard(x.device());
  ActivationGrads g;
  g.grad_input = at::empty_like(x);
  kernels::bias_gelu_bwd(kernel_dtype("bias_gelu_bwd", x), x.numel() / width, width, grad_out.data_ptr(),
                         x.data_ptr(), bias.defined() ? bias.data_ptr() : nullptr, g.grad_input.data_ptr(),
                         at::cuda::getCurrentCUDAStream().stream());
  g.grad_bias = bias_grad(g.grad_input, bias);
  return g;
#else
  MEGATRON_FAIL("internal error: no CUDA kernels in this build");
#endif
}

at::Tensor swiglu_fwd(const at::Tensor& x, const at::Tensor& bias) {
  if (!aten_detail::on_kernel_path(x)) return swiglu_reference(x, bias);
#if MEGATRON_CUDA_KERNELS
  const int64_t width = check_inputs("swiglu_fwd", x, bias, true);
  const c10::cuda::CUDAGuard guard(x.device());
  std::vector<int64_t> out_shape = x.sizes().vec();
  out_shape.back() = width / 2;
  at::Tensor out = at::empty(out_shape, x.options());
  kernels::swiglu_fwd(kernel_dtype("swiglu_fwd", x), x.numel() / width, width / 2, x.data_ptr(),
                      bias.defined() ? bias.data_ptr() : nullptr, out.data_ptr(),
                      at::cuda::getCurrentCUDAStream().stream());
  return out;
#else
  MEGATRON_FAIL("internal error: no CUDA kernels in this build");
#endif
}

ActivationGrads swiglu_bwd(const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& bias) {
  if (!aten_detail::on_kernel_path(x)) return swiglu_bwd_reference(grad_out, x, bias);
#if MEGATRON_CUDA_KERNELS
  const int64_t width = check_inputs("swiglu_bwd", x, bias, true);
  check_grad_out("swiglu_bwd", grad_out, x, width / 2);
  const c10::cuda::CUDAGuard guard(x.device());
  ActivationGrads g;
  g.grad_input = at::empty_like(x);
  kernels::swiglu_bwd(kernel_dtype("swiglu_bwd", x), x.numel() / width, width / 2, grad_out.data_ptr(),
                      x.data_ptr(), bias.defined() ? bias.data_ptr() : nullptr, g.grad_input.data_ptr(),
                      at::cuda::getCurrentCUDAStream().stream());
  g.grad_bias = bias_grad(g.grad_input, bias);
  return g;
#else
  MEGATRON_FAIL("internal error: no CUDA kernels in this build");
#endif
}

at::Tensor bias_gelu_reference(const at::Tensor& x, const at::Tensor& bias) {
  const at::Tensor y = with_bias(x, bias);
  const at::Tensor t = at::tanh(0.79788456 * y * (1.0 + 0.044715 * y * y));
  return (0.5 * y * (1.0 + t)).to(x.scalar_type());
}

ActivationGrads bias_gelu_bwd_reference(const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& bias) {
  const at::Tensor y = with_bias(x, bias);
  const at::Tensor t = at::tanh(0.79788456 * y * (1.0 + 0.044715 * y * y));
  const at::Tensor ff = 0.5 * y * ((1.0 - t * t) * (0.79788456 + 0.1070322243 * y * y)) + 0.5 * (1.0 + t);
  ActivationGrads g;
  g.grad_input = (grad_out.to(at::kFloat) * ff).to(x.scalar_type());
  g.grad_bias = bias_grad(g.grad_input, bias);
  return g;
}

at::Tensor swiglu_reference(const at::Tensor& x, const at::Tensor& bias) {
  const auto halves = with_bias(x, bias).chunk(2, -1);
  return (halves[0] * at::sigmoid(halves[0]) * halves[1]).to(x.scalar_type());
}

ActivationGrads swiglu_bwd_reference(const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& bias) {
  const auto halves = with_bias(x, bias).chunk(2, -1);
  const at::Tensor& a = halves[0];
  const at::Tensor& b = halves[1];
  const at::Tensor g = grad_out.to(at::kFloat);
  const at::Tensor s = at::sigmoid(a);
  ActivationGrads out;
  out.grad_input = at::cat({g * b * s * (1.0 + a * (1.0 - s)), g * a * s}, -1).to(x.scalar_type());
  out.grad_bias = bias_grad(out.grad_input, bias);
  return out;
}

}  // namespace megatron::kernels::aten
