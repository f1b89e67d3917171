// Norms, MLP, dropout and the transformer layer (see transformer_layer.h); attention is in
// attention.cpp.
#include "megatron/model/transformer_layer.h"

#include <cmath>

#include "megatron/kernels/ops.h"
#include "megatron/model/moe_layer.h"

namespace megatron::model {

at::Tensor dropout(const at::Tensor& x, double p, const ForwardContext& ctx, at::Generator* gen) {
  if (!ctx.training || p == 0.0) return x;
  at::Tensor mask = at::empty_like(x, at::MemoryFormat::Contiguous);
  {
    at::NoGradGuard no_grad;
    mask.bernoulli_(1.0 - p, gen ? std::optional<at::Generator>(*gen) : std::nullopt);
    mask.mul_(1.0 / (1.0 - p));  // the kept elements' scale, folded into the mask
  }
  return x * mask;
}

Norm::Norm(const ModelConfig& config, bool sequence_parallel, const at::TensorOptions& options, std::int64_t size)
    : kind_(config.normalization), eps_(config.norm_epsilon), sequence_parallel_(sequence_parallel) {
  const std::int64_t n = size > 0 ? size : config.hidden_size;
  weight_ = at::ones({n}, options).set_requires_grad(true);
  if (kind_ == Normalization::kLayerNorm) bias_ = at::zeros({n}, options).set_requires_grad(true);
}

at::Tensor Norm::forward(const at::Tensor& x) const {
  if (kind_ == Normalization::kLayerNorm) return kernels::ops::layer_norm(x, weight_, bias_, eps_);
  return kernels::ops::rms_norm(x, weight_, eps_);
}

std::pair<at::Tensor, at::Tensor> Norm::forward(const at::Tensor& x, const at::Tensor& residual) const {
  if (kind_ == Normalization::kLayerNorm) return kernels::ops::layer_norm_residual(x, residual, weight_, bias_, eps_);
  return kernels::ops::rms_norm_residual(x, residual, weight_, eps_);
}

void Norm::collect(const std::string& prefix, ParameterList& out) const {
  const parallel::TensorParallelLayout layout{-1, 1, sequence_parallel_};
  out.add(prefix + "weight", weight_, layout);
  if (bias_.defined()) out.add(prefix + "bias", bias_, layout);
}

namespace {

// The submodules' names, for the initialisation streams and collect().
constexpr const char* kFc1 = "linear_fc1.";
constexpr const char* kFc2 = "linear_fc2.";
constexpr const char* kInputNorm = "input_layernorm.";
constexpr const char* kAttention = "self_attention.";
constexpr const char* kMlpNorm = "pre_mlp_layernorm.";
constexpr const char* kMlp = "mlp.";

// Megatron's scaled_init_method_normal: the output layers of each sublayer use std / sqrt(2L).
double scaled_std(const ModelConfig& c) { return c.init_method_std / std::sqrt(2.0 * c.num_layers); }

// SwiGLU's fc1 is [gate; up] in full and [gate block r; up block r] on TP rank r (stride 2,
// spec 10.3), so silu(first half) * second half is right on every rank.
parallel::LinearOptions fc1_options(const ModelConfig& c, parallel::LinearOptions options) {
  options.partition_stride = c.swiglu ? 2 : 1;
  options.skip_bias_add = true;  // the bias goes into the (fused) activation
  return options;
}

parallel::LinearOptions layer_linear_options(const ModelConfig& c, bool sequence_parallel,
                                             const at::TensorOptions& options) {
  parallel::LinearOptions o;
  o.bias = c.add_bias_linear;
  o.sequence_parallel = sequence_parallel;
  o.tensor_options = options;
  return o;
}

}  // namespace

Mlp::Mlp(const ModelConfig& c, const parallel::ParameterInit& init, const parallel::ParallelContext& pc,
         const parallel::LinearOptions& options)
    : swiglu_(c.swiglu),
      fused_(c.bias_activation_fusion),
      linear_fc1_(c.hidden_size, c.swiglu ? 2 * c.ffn_hidden_size : c.ffn_hidden_size, c.init_method_std,
                  init.scope(kFc1), pc, fc1_options(c, options)),
      linear_fc2_(c.ffn_hidden_size, c.hidden_size, scaled_std(c), init.scope(kFc2), pc, options) {}

std::pair<at::Tensor, at::Tensor> Mlp::forward(const at::Tensor& x) const {
  at::Tensor h = linear_fc1_.forward(x);  // without its bias
  const at::Tensor& bias = linear_fc1_.bias();
  if (fused_) {
    // Megatron's bias_gelu_impl / bias_swiglu_impl; its fused GeLU is the tanh approximation.
    h = swiglu_ ? kernels::ops::bias_swiglu(h, bias) : kernels::ops::bias_gelu(h, bias);
  } else {
    if (bias.defined()) h = h + bias;
    if (swiglu_) {
      const auto halves = h.chunk(2, -1);  // [gate ; up] per rank (spec 10.3)
      h = at::silu(halves[0]) * halves[1];
    } else {
      h = at::gelu(h);  // unfused: the exact erf GeLU (F.gelu)
    }
  }
  return {linear_fc2_.forward(h), linear_fc2_.bias()};
}

void Mlp::collect(const std::string& prefix, ParameterList& out) const {
  linear_fc1_.collect(prefix + kFc1, out);
  linear_fc2_.collect(prefix + kFc2, out);
}

TransformerLayer::TransformerLayer(const ModelConfig& c, const parallel::ParameterInit& init,
                                   const parallel::ParallelContext& pc, bool sequence_parallel,
                                   const at::TensorOptions& options, int layer)
    : hidden_dropout_(c.hidden_dropout),
      sequence_parallel_(sequence_parallel),
      input_layernorm_(c, sequence_parallel, options),
      self_attention_(c, init.scope(kAttention), pc, layer_linear_options(c, sequence_parallel, options)),
      pre_mlp_layernorm_(c, sequence_parallel, options) {
  if (c.moe.is_moe_layer(layer)) {
    moe_ = std::make_unique<MoeLayer>(c, init.scope(kMlp), pc, layer_linear_options(c, sequence_parallel, options),
                                      layer);
  } else {
    mlp_.emplace(c, init.scope(kMlp), pc, layer_linear_options(c, sequence_parallel, options));
  }
}

TransformerLayer::TransformerLayer(TransformerLayer&&) noexcept = default;
TransformerLayer::~TransformerLayer() = default;

std::pair<at::Tensor, at::Tensor> TransformerLayer::mlp_forward(const at::Tensor& x, const ForwardContext& ctx) const {
  return moe_ ? moe_->forward(x, ctx) : mlp_->forward(x);
}

at::Tensor TransformerLayer::forward(const at::Tensor& x, const at::Tensor& mask, const ForwardContext& ctx) const {
  auto bias_dropout = [&](const at::Tensor& out, const at::Tensor& bias) {
    return dropout(bias.defined() ? out + bias : out, hidden_dropout_, ctx, ctx.hidden_gen(sequence_parallel_));
  };
  auto [attn, attn_bias] = self_attention_.forward(input_layernorm_.forward(x), mask, ctx);
  // h = x + dropout(attn + bias), and norm2(h), in one fused op.
  const auto [normed, h] = pre_mlp_layernorm_.forward(bias_dropout(attn, attn_bias), x);
  auto [mlp, mlp_bias] = mlp_forward(normed, ctx);
  return h + bias_dropout(mlp, mlp_bias);
}

at::Tensor TransformerLayer::forward_cached(const at::Tensor& x, at::Tensor& keys, at::Tensor& values) const {
  auto [attn, attn_bias] = self_attention_.forward_cached(input_layernorm_.forward(x), keys, values);
  const auto [normed, h] = pre_mlp_layernorm_.forward(attn_bias.defined() ? attn + attn_bias : attn, x);
  auto [mlp, mlp_bias] = mlp_forward(normed, ForwardContext{false});
  return h + (mlp_bias.defined() ? mlp + mlp_bias : mlp);
}

void TransformerLayer::collect(const std::string& prefix, ParameterList& out) const {
  input_layernorm_.collect(prefix + kInputNorm, out);
  self_attention_.collect(prefix + kAttention, out);
  pre_mlp_layernorm_.collect(prefix + kMlpNorm, out);
  if (moe_) {
    moe_->collect(prefix + kMlp, out);
  } else {
    mlp_->collect(prefix + kMlp, out);
  }
}

}  // namespace megatron::model
