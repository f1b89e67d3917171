// The differentiable fused ops (see ops.h): torch::autograd::Function nodes whose forward and
// backward call the ATen-facing entries of this folder, which pick the CUDA kernel or the ATen
// reference per tensor. Inputs are made contiguous here because the kernels read them flat.
#include "megatron/kernels/ops.h"

#include <torch/csrc/autograd/custom_function.h>

#include <optional>

#include "megatron/core/check.h"
#include "megatron/kernels/aten/activation_ops.h"
#include "megatron/kernels/aten/cross_entropy_ops.h"
#include "megatron/kernels/aten/norm_ops.h"
#include "megatron/kernels/aten/rope_ops.h"
#include "megatron/kernels/aten/softmax_ops.h"

namespace megatron::kernels::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::Function;
using torch::autograd::variable_list;

at::Tensor contiguous_or_undefined(const at::Tensor& t) { return t.defined() ? t.contiguous() : t; }

// Optional tensor arguments travel as std::optional: an undefined at::Tensor may not be an input
// of an autograd function.
std::optional<at::Tensor> opt(const at::Tensor& t) { return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt; }
at::Tensor contiguous_or_undefined(const std::optional<at::Tensor>& t) {
  return t ? contiguous_or_undefined(*t) : at::Tensor();
}

// A gradient the engine did not produce (an output that was not used) as zeros shaped like `like`.
at::Tensor grad_or_zeros(const at::Tensor& grad, const at::Tensor& like) {
  return grad.defined() ? grad.contiguous() : at::zeros_like(like, at::MemoryFormat::Contiguous);
}

// LayerNorm / RMSNorm with an optional residual add in front; outputs (out) or (out, sum).
struct NormFunction : Function<NormFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const std::optional<at::Tensor>& residual,
                               const at::Tensor& weight, const std::optional<at::Tensor>& bias, double eps, bool rms) {
    const at::Tensor xc = x.contiguous(), rc = contiguous_or_undefined(residual);
    const at::Tensor w = weight.contiguous(), b = contiguous_or_undefined(bias);
    const aten::NormOutputs o = rms ? aten::rms_norm_fwd(xc, w, eps, rc) : aten::layer_norm_fwd(xc, w, b, eps, rc);
    const at::Tensor input = rc.defined() ? o.residual_out : xc;  // what was normalised
    ctx->save_for_backward({input, w, o.mean, o.rstd});
    ctx->saved_data["rms"] = rms;
    ctx->saved_data["has_bias"] = b.defined();
    ctx->saved_data["has_residual"] = rc.defined();
    if (rc.defined()) return {o.out, o.residual_out};
    return {o.out};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &input = saved[0], &weight = saved[1], &mean = saved[2], &rstd = saved[3];
    const bool rms = ctx->saved_data["rms"].toBool();
    const bool has_bias = ctx->saved_data["has_bias"].toBool();
    const bool has_residual = ctx->saved_data["has_residual"].toBool();
    const at::Tensor grad_out = grad_or_zeros(grads[0], input);
    const at::Tensor grad_sum = has_residual && grads.size() > 1 ? contiguous_or_undefined(grads[1]) : at::Tensor();
    const aten::NormGrads g = rms ? aten::rms_norm_bwd(grad_out, input, weight, rstd, grad_sum)
                                  : aten::layer_norm_bwd(grad_out, input, weight, mean, rstd, has_bias, grad_sum);
    return {g.grad_input, has_residual ? g.grad_input : at::Tensor(), g.grad_weight, g.grad_bias, at::Tensor(),
            at::Tensor()};
  }
};

struct BiasGeluFunction : Function<BiasGeluFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const std::optional<at::Tensor>& bias) {
    const at::Tensor xc = x.contiguous(), b = contiguous_or_undefined(bias);
    ctx->save_for_backward({xc, b});
    return aten::bias_gelu_fwd(xc, b);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const aten::ActivationGrads g = aten::bias_gelu_bwd(grads[0].contiguous(), saved[0], saved[1]);
    return {g.grad_input, g.grad_bias};
  }
};

struct BiasSwigluFunction : Function<BiasSwigluFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const std::optional<at::Tensor>& bias) {
    const at::Tensor xc = x.contiguous(), b = contiguous_or_undefined(bias);
    ctx->save_for_backward({xc, b});
    return aten::swiglu_fwd(xc, b);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const aten::ActivationGrads g = aten::swiglu_bwd(grads[0].contiguous(), saved[0], saved[1]);
    return {g.grad_input, g.grad_bias};
  }
};

struct RopeFunction : Function<RopeFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& t, const at::Tensor& freqs, bool interleaved) {
    ctx->save_for_backward({freqs});
    ctx->saved_data["interleaved"] = interleaved;
    return rope_forward(t, freqs, interleaved);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor freqs = ctx->get_saved_variables()[0];
    return {rope_backward(grads[0], freqs, ctx->saved_data["interleaved"].toBool()), at::Tensor(), at::Tensor()};
  }
};

struct CausalSoftmaxFunction : Function<CausalSoftmaxFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, double scale) {
    const at::Tensor y = causal_softmax_forward(x.contiguous(), scale);
    ctx->save_for_backward({y});
    ctx->saved_data["scale"] = scale;
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor y = ctx->get_saved_variables()[0];
    return {causal_softmax_backward(grads[0].contiguous(), y, ctx->saved_data["scale"].toDouble()), at::Tensor()};
  }
};

struct CrossEntropyFunction : Function<CrossEntropyFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& target,
                            int64_t ignore_index) {
    const CrossEntropyResult r = cross_entropy_forward(logits, target, ignore_index);
    ctx->save_for_backward({logits, target, r.max, r.sum_exp});
    ctx->saved_data["ignore_index"] = ignore_index;
    return r.loss;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    return {cross_entropy_backward(grads[0], s[0], s[1], s[2], s[3], 0, ctx->saved_data["ignore_index"].toInt()),
            at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps) {
  return NormFunction::apply(x, std::nullopt, weight, opt(bias), eps, false)[0];
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return NormFunction::apply(x, std::nullopt, weight, std::nullopt, eps, true)[0];
}

std::pair<at::Tensor, at::Tensor> layer_norm_residual(const at::Tensor& x, const at::Tensor& residual,
                                                      const at::Tensor& weight, const at::Tensor& bias, double eps) {
  MEGATRON_CHECK(residual.defined() && residual.sizes() == x.sizes(), "layer_norm_residual: residual ",
                 residual.sizes(), " must be shaped like x ", x.sizes());
  const auto out = NormFunction::apply(x, opt(residual), weight, opt(bias), eps, false);
  return {out[0], out[1]};
}

std::pair<at::Tensor, at::Tensor> rms_norm_residual(const at::Tensor& x, const at::Tensor& residual,
                                                    const at::Tensor& weight, double eps) {
  MEGATRON_CHECK(residual.defined() && residual.sizes() == x.sizes(), "rms_norm_residual: residual ",
                 residual.sizes(), " must be shaped like x ", x.sizes());
  const auto out = NormFunction::apply(x, opt(residual), weight, std::nullopt, eps, true);
  return {out[0], out[1]};
}

at::Tensor bias_gelu(const at::Tensor& x, const at::Tensor& bias) { return BiasGeluFunction::apply(x, opt(bias)); }

at::Tensor bias_swiglu(const at::Tensor& x, const at::Tensor& bias) { return BiasSwigluFunction::apply(x, opt(bias)); }

at::Tensor rope(const at::Tensor& t, const at::Tensor& freqs, bool interleaved) {
  return RopeFunction::apply(t, freqs, interleaved);
}

at::Tensor causal_softmax(const at::Tensor& x, double scale) { return CausalSoftmaxFunction::apply(x, scale); }

at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& target, int64_t ignore_index) {
  return CrossEntropyFunction::apply(logits, target, ignore_index);
}

namespace {
bool cpu_half(const at::Tensor& t) { return t.scalar_type() == at::kHalf && t.device().is_cpu(); }
}  // namespace

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (!cpu_half(x) || !cpu_half(weight)) return at::linear(x, weight, bias);
  const at::Tensor b = bias.defined() ? bias.to(at::kFloat) : bias;
  return at::linear(x.to(at::kFloat), weight.to(at::kFloat), b).to(at::kHalf);
}

at::Tensor matmul(const at::Tensor& a, const at::Tensor& b) {
  if (!cpu_half(a) || !cpu_half(b)) return at::matmul(a, b);
  return at::matmul(a.to(at::kFloat), b.to(at::kFloat)).to(at::kHalf);
}

at::Tensor grouped_mm(const at::Tensor& x, const at::Tensor& b, const at::Tensor& offsets) {
  if (!cpu_half(x) || !cpu_half(b)) return at::_grouped_mm(x, b, offsets);
  return at::_grouped_mm(x.to(at::kFloat), b.to(at::kFloat), offsets).to(at::kHalf);
}

}  // namespace megatron::kernels::ops
