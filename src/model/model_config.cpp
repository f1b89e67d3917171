// ModelConfig checks, derived sizes and parameter counts (see model_config.h); its field table,
// JSON and flags are in model_config_fields.cpp.
#include "megatron/model/model_config.h"

#include "megatron/core/check.h"
#include "megatron/core/saturating.h"

namespace megatron::model {

std::vector<std::string> ModelConfig::validate() const {
  std::vector<std::string> problems;
  auto need = [&](bool ok, auto&&... parts) {
    if (!ok) problems.push_back(str_cat(parts...));
  };
  need(num_layers > 0, "--num-layers must be positive");
  need(hidden_size > 0, "--hidden-size must be positive");
  need(ffn_hidden_size > 0, "--ffn-hidden-size must be positive");
  need(num_attention_heads > 0, "--num-attention-heads must be positive");
  need(kv_channels > 0, "--kv-channels must be positive");
  need(num_query_groups > 0 && num_attention_heads % std::max(1, num_query_groups) == 0,
       "--num-attention-heads (", num_attention_heads, ") must be divisible by --num-query-groups (",
       num_query_groups, ")");
  need(seq_length > 0, "--seq-length must be positive");
  need(position_embedding != PositionEmbedding::kLearnedAbsolute || max_position_embeddings >= seq_length,
       "--max-position-embeddings (", max_position_embeddings, ") must be at least --seq-length (", seq_length, ")");
  need(position_embedding != PositionEmbedding::kRope || (rotary_dim() > 0 && rotary_dim() % 2 == 0),
       "--rotary-percent ", rotary_percent, " of --kv-channels ", kv_channels,
       " must give a positive even number of rotated channels");
  need(padded_vocab_size > 0, "the padded vocabulary size must be positive");
  need(norm_epsilon > 0, "--norm-epsilon must be positive");
  need(init_method_std >= 0, "--init-method-std must not be negative");
  need(attention_dropout >= 0 && attention_dropout < 1, "--attention-dropout must be in [0, 1)");
  need(hidden_dropout >= 0 && hidden_dropout < 1, "--hidden-dropout must be in [0, 1)");
  if (moe.enabled()) {
    const std::vector<std::string> more = moe.validate(num_layers);
    problems.insert(problems.end(), more.begin(), more.end());
  }
  return problems;
}

void ModelConfig::derive_defaults() {
  if (ffn_hidden_size == 0) ffn_hidden_size = static_cast<int>(default_ffn_hidden_size(hidden_size, swiglu));
  if (kv_channels == 0 && num_attention_heads > 0) kv_channels = hidden_size / num_attention_heads;
  if (num_query_groups == 0) num_query_groups = num_attention_heads;
}

std::int64_t ModelConfig::default_ffn_hidden_size(std::int64_t hidden_size, bool swiglu) {
  return swiglu ? 4 * hidden_size * 2 / 3 / 64 * 64 : 4 * hidden_size;
}

std::int64_t ModelConfig::padded_vocab_size_for(std::int64_t vocab, int divisible_by, int tp) {
  MEGATRON_ASSERT(vocab > 0 && divisible_by > 0 && tp > 0);
  const std::int64_t multiple = std::int64_t{divisible_by} * tp;
  return (vocab + multiple - 1) / multiple * multiple;
}

std::int64_t ModelConfig::num_parameters() const { return num_parameters(1, num_layers, true, true); }

namespace {

// The MoE layers among `layers` of a model of `num_layers`: exact for the whole model, its share
// for a part.
std::int64_t moe_layers_among(const MoeConfig& moe, int num_layers, std::int64_t layers) {
  const int all = moe.num_moe_layers(num_layers);
  return layers == num_layers ? all : (layers * all + num_layers / 2) / std::max(1, num_layers);
}

}  // namespace

std::int64_t ModelConfig::num_expert_parameters(int tp, std::int64_t layers, int ep, int etp) const {
  MEGATRON_ASSERT(tp > 0 && ep > 0 && etp >= 0 && layers >= 0);
  if (!moe.enabled()) return 0;
  const std::int64_t f = moe.expert_ffn_hidden_size(ffn_hidden_size), glu = swiglu ? 2 : 1;
  const std::int64_t per_expert = saturating_mul(saturating_mul(glu + 1, f), hidden_size);
  const std::int64_t per_layer = saturating_mul(moe.num_experts / ep, per_expert) / (etp > 0 ? etp : tp);
  return saturating_mul(moe_layers_among(moe, num_layers, layers), per_layer);
}

std::int64_t ModelConfig::num_parameters(int tp, std::int64_t layers, bool first_chunk, bool last_chunk, int ep,
                                         int etp) const {
  MEGATRON_ASSERT(tp > 0 && ep > 0 && layers >= 0);
  const auto mul = [](std::int64_t a, std::int64_t b) { return saturating_mul(a, b); };
  const auto add = [](std::int64_t a, std::int64_t b) { return saturating_add(a, b); };
  const std::int64_t h = hidden_size, bias = add_bias_linear ? 1 : 0;
  const std::int64_t norm = normalization == Normalization::kLayerNorm ? 2 * h : h;
  // Column-parallel outputs and row-parallel inputs are split over TP.
  // In 64 bits: qkv_size() is an int and wraps for sizes the flags still allow.
  const std::int64_t qkv =
      mul(add(num_attention_heads, mul(2, num_query_groups)), kv_channels) / tp;
  const std::int64_t q = mul(num_attention_heads, kv_channels) / tp;
  const std::int64_t fc1_out = (swiglu ? 2 * std::int64_t{ffn_hidden_size} : ffn_hidden_size) / tp;
  const std::int64_t ffn = ffn_hidden_size / tp;
  std::int64_t layer = add(add(norm, mul(qkv, add(h, bias))), add(mul(q, h), bias * h));        // attention
  if (qk_layernorm) layer = add(layer, 2 * (norm / h) * kv_channels);  // the q and k norms, replicated
  const std::int64_t dense_mlp = add(add(norm, mul(fc1_out, add(h, bias))), add(mul(ffn, h), bias * h));
  std::int64_t total = mul(layers, add(layer, dense_mlp));
  if (moe.enabled()) {  // MoE layers: the router, the experts, the shared expert, in place of the MLP
    const std::int64_t fs = moe.shared_expert_intermediate_size, glu = swiglu ? 2 : 1;
    const std::int64_t moe_layers = moe_layers_among(moe, num_layers, layers);
    const std::int64_t router_and_shared = add(add(norm, mul(moe.num_experts, h)), mul(mul(add(glu, 1), fs), h) / tp);
    total = add(total, mul(moe_layers, router_and_shared - dense_mlp));
    total = add(total, num_expert_parameters(tp, layers, ep, etp));
  }
  const std::int64_t vocab_rows = mul(padded_vocab_size / tp, h);
  if (first_chunk) {
    total = add(total, vocab_rows);
    if (position_embedding == PositionEmbedding::kLearnedAbsolute) total = add(total, mul(max_position_embeddings, h));
  }
  if (last_chunk) {
    total = add(total, norm);
    if (untie_embeddings_and_output_weights || !first_chunk) total = add(total, vocab_rows);
  }
  return total;
}

}  // namespace megatron::model
