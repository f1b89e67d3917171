// ModelConfig checks, derived sizes, JSON and parameter counts (see model_config.h).
#include "megatron/model/model_config.h"

#include <nlohmann/json.hpp>

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

namespace {

using nlohmann::json;

// An enum as Megatron's name (the model's tables in model_config.h); a value without a name (no
// recomputation) is Megatron's None.
template <typename E>
json enum_json(E value) {
  const std::string_view name = enum_name(value);
  return name.empty() ? json(nullptr) : json(std::string(name));
}

// Reads j[key] into `field` when present; the wrong type or an unknown choice names the key.
class Reader {
 public:
  explicit Reader(const json& j) : j_(j) {}
  template <typename T>
  void operator()(const char* key, T& field) {
    if (!j_.contains(key)) return;
    const json& v = j_.at(key);
    const bool ok = std::is_same_v<T, bool> ? v.is_boolean() : std::is_floating_point_v<T> ? v.is_number() : v.is_number_integer();
    MEGATRON_CHECK(ok, "model configuration: '", key, "' is ", v.dump(), ", not ", std::is_same_v<T, bool> ? "true or false" : "a number");
    field = v.get<T>();
  }
  // An integer, or the list of 0s and 1s (Megatron's two forms of --moe-layer-freq).
  void layer_freq(const char* key, int& every, std::vector<int>& pattern) {
    if (!j_.contains(key)) return;
    const json& v = j_.at(key);
    if (v.is_array()) {
      pattern.clear();
      for (const json& x : v) {
        MEGATRON_CHECK(x.is_number_integer(), "model configuration: '", key, "' is ", v.dump(), ", not a list of 0 and 1");
        pattern.push_back(x.get<int>());
      }
      return;
    }
    (*this)(key, every);
  }
  template <typename E>
  void choice(const char* key, E& field) {
    if (!j_.contains(key)) return;
    const json& v = j_.at(key);
    const auto value = v.is_string() ? parse_enum<E>(v.get<std::string>())
                       : v.is_null() && enum_name(E{}).empty() ? std::optional<E>(E{})
                                                               : std::nullopt;
    MEGATRON_CHECK(value.has_value(), "model configuration: '", key, "' is ", v.dump(), ", not one of ",
                   quoted_enum_names<E>());
    field = *value;
  }

 private:
  const json& j_;
};

// The members in one list, for both directions: f(key, member) or f.choice(key, member).
template <typename Config, typename F>
void visit_fields(Config& c, F& f) {
  f("num_layers", c.num_layers);
  f("hidden_size", c.hidden_size);
  f("ffn_hidden_size", c.ffn_hidden_size);
  f("num_attention_heads", c.num_attention_heads);
  f("num_query_groups", c.num_query_groups);
  f("kv_channels", c.kv_channels);
  f("seq_length", c.seq_length);
  f("max_position_embeddings", c.max_position_embeddings);
  f.choice("position_embedding_type", c.position_embedding);
  f("rotary_base", c.rotary_base);
  f("rotary_percent", c.rotary_percent);
  f("rotary_interleaved", c.rotary_interleaved);
  f.choice("normalization", c.normalization);
  f("norm_epsilon", c.norm_epsilon);
  f("swiglu", c.swiglu);
  f("qk_layernorm", c.qk_layernorm);
  f("untie_embeddings_and_output_weights", c.untie_embeddings_and_output_weights);
  f("add_bias_linear", c.add_bias_linear);
  f("init_method_std", c.init_method_std);
  f("attention_dropout", c.attention_dropout);
  f("hidden_dropout", c.hidden_dropout);
  f("padded_vocab_size", c.padded_vocab_size);
  f("sequence_parallel", c.sequence_parallel);
  f("bias_activation_fusion", c.bias_activation_fusion);
  f("masked_softmax_fusion", c.masked_softmax_fusion);
  f("apply_rope_fusion", c.apply_rope_fusion);
  f.choice("attention_backend", c.attention_backend);
  f.choice("recompute_granularity", c.recompute_granularity);
  f.choice("recompute_method", c.recompute_method);
  f("recompute_num_layers", c.recompute_num_layers);
  f("num_experts", c.moe.num_experts);
  f.layer_freq("moe_layer_freq", c.moe.layer_freq, c.moe.layer_pattern);
  f("moe_ffn_hidden_size", c.moe.ffn_hidden_size);
  f("moe_shared_expert_intermediate_size", c.moe.shared_expert_intermediate_size);
  f("moe_router_topk", c.moe.router_topk);
  f.choice("moe_router_score_function", c.moe.score_function);
  f("moe_router_pre_softmax", c.moe.router_pre_softmax);
  f("moe_router_topk_scaling_factor", c.moe.router_topk_scaling_factor);
  f("moe_router_num_groups", c.moe.router_num_groups);
  f("moe_router_group_topk", c.moe.router_group_topk);
  f("moe_router_enable_expert_bias", c.moe.router_enable_expert_bias);
  f("moe_router_bias_update_rate", c.moe.router_bias_update_rate);
  f.choice("moe_router_load_balancing_type", c.moe.load_balancing);
  f("moe_aux_loss_coeff", c.moe.aux_loss_coeff);
  f("moe_z_loss_coeff", c.moe.z_loss_coeff);
  f("moe_expert_capacity_factor", c.moe.expert_capacity_factor);
  f("moe_pad_expert_input_to_capacity", c.moe.pad_expert_input_to_capacity);
  f.choice("moe_token_drop_policy", c.moe.token_drop_policy);
  f.choice("moe_token_dispatcher_type", c.moe.token_dispatcher);
}

class Writer {
 public:
  template <typename T>
  void operator()(const char* key, const T& field) {
    j[key] = field;
  }
  template <typename E>
  void choice(const char* key, const E& field) {
    j[key] = enum_json(field);
  }
  void layer_freq(const char* key, int every, const std::vector<int>& pattern) {
    j[key] = pattern.empty() ? json(every) : json(pattern);
  }
  json j = json::object();
};

// The members that give the parameters their shapes, with their JSON names.
constexpr const char* kShapeKeys[] = {"num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads",
                                      "num_query_groups", "kv_channels", "max_position_embeddings",
                                      "position_embedding_type", "rotary_percent", "normalization", "swiglu",
                                      "untie_embeddings_and_output_weights", "add_bias_linear", "padded_vocab_size", "qk_layernorm",
                                      "num_experts", "moe_layer_freq", "moe_ffn_hidden_size",
                                      "moe_shared_expert_intermediate_size"};

}  // namespace

json ModelConfig::to_json() const {
  Writer w;
  visit_fields(*this, w);
  return w.j;
}

ModelConfig ModelConfig::from_json(const json& j) {
  MEGATRON_CHECK(j.is_object(), "model configuration: expected a JSON object, got ", j.dump());
  ModelConfig c;
  Reader r(j);
  visit_fields(c, r);
  return c;
}

std::vector<std::string> ModelConfig::shape_differences_from(const ModelConfig& saved) const {
  const json a = saved.to_json(), b = to_json();
  std::vector<std::string> out;
  for (const char* key : kShapeKeys) {
    if (a.at(key) != b.at(key)) out.push_back(str_cat(key, ": checkpoint ", a.at(key).dump(), ", command line ", b.at(key).dump()));
  }
  return out;
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
