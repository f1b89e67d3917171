// config.json as Megatron's model (see hf_config.h).
#include "hf_config.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>

#include "megatron/core/check.h"
#include "megatron/core/strings.h"

namespace megatron::interop::detail {
namespace {

using nlohmann::json;

constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();

// Typed reads of config.json's keys. A key that is absent or null takes its fallback (transformers'
// None); a value of the wrong type or out of range is a problem naming the key and the value as
// written, and reads as the fallback (0 for a required integer) so that reading goes on.
class Keys {
 public:
  Keys(const json& j, std::vector<std::string>& problems) : j_(j), problems_(problems) {}

  bool given(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  // A whole number in [low, high]. Without a fallback the key is required. A fallback derived from
  // other keys is checked against the range too (it becomes one of Megatron's int sizes).
  std::int64_t integer(const char* key, std::optional<std::int64_t> fallback, std::int64_t low = 1,
                       std::int64_t high = kIntMax) {
    const std::string range = str_cat("expected a whole number from ", low, " to ", high);
    if (!given(key)) {
      if (!fallback) {
        problems_.push_back(str_cat(key, ": missing; ", range));
        return 0;
      }
      if (*fallback < low || *fallback > high) {
        problems_.push_back(str_cat(key, ": not given, and its default from the other sizes is ", *fallback, "; ", range));
        return 0;
      }
      return *fallback;
    }
    const json& v = j_.at(key);
    // JSON's integers only: 2.7, 4.0 and 1e12 are floats in Python too, and transformers' sizes are ints.
    const bool in_range = v.is_number_unsigned()  ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(high) &&
                                                       static_cast<std::int64_t>(v.get<std::uint64_t>()) >= low
                          : v.is_number_integer() ? v.get<std::int64_t>() >= low && v.get<std::int64_t>() <= high
                                                  : false;
    if (!in_range) {
      problems_.push_back(str_cat(key, " is ", v.dump(), "; ", range));
      return 0;
    }
    return v.get<std::int64_t>();
  }

  double real(const char* key, double fallback) {
    if (!given(key)) return fallback;
    const json& v = j_.at(key);
    if (v.is_number()) return v.get<double>();
    problems_.push_back(str_cat(key, " is ", v.dump(), "; expected a number"));
    return fallback;
  }

  bool boolean(const char* key, bool fallback) {
    if (!given(key)) return fallback;
    const json& v = j_.at(key);
    if (v.is_boolean()) return v.get<bool>();
    problems_.push_back(str_cat(key, " is ", v.dump(), "; expected true or false"));
    return fallback;
  }

  // A list of whole numbers (empty when absent); a value that is not one is a problem.
  std::vector<std::int64_t> integers(const char* key) {
    std::vector<std::int64_t> out;
    if (!given(key)) return out;
    const json& v = j_.at(key);
    for (std::size_t i = 0; v.is_array() && i < v.size(); ++i) {
      if (!v[i].is_number_integer()) break;
      out.push_back(v[i].get<std::int64_t>());
    }
    if (!v.is_array() || out.size() != v.size()) {
      problems_.push_back(str_cat(key, " is ", v.dump(), "; expected a list of whole numbers"));
      out.clear();
    }
    return out;
  }

  std::string text(const char* key, const std::string& fallback) {
    if (!given(key)) return fallback;
    const json& v = j_.at(key);
    if (v.is_string()) return v.get<std::string>();
    problems_.push_back(str_cat(key, " is ", v.dump(), "; expected a string"));
    return fallback;
  }

 private:
  const json& j_;
  std::vector<std::string>& problems_;
};

void read_gpt2(Keys& k, HfConfig& out, std::vector<std::string>& problems) {
  model::ModelConfig& c = out.model;
  const std::int64_t hidden = k.integer("n_embd", std::nullopt);
  const std::int64_t heads = k.integer("n_head", std::nullopt);
  if (hidden > 0 && heads > 0 && hidden % heads != 0) {
    problems.push_back(str_cat("n_embd ", hidden, " is not divisible by n_head ", heads,
                               ": GPT-2's heads split the hidden size evenly"));
  }
  const std::string act = k.text("activation_function", "gelu_new");
  // gelu_pytorch_tanh is gelu_new's function (the tanh approximation) in PyTorch's kernel.
  if (act != "gelu_new" && act != "gelu_pytorch_tanh" && act != "gelu") {
    problems.push_back("activation_function " + act +
                       ": megatron_train has gelu_new / gelu_pytorch_tanh (fused) and gelu (--no-bias-gelu-fusion)");
  }
  if (k.boolean("scale_attn_by_inverse_layer_idx", false)) problems.push_back("scale_attn_by_inverse_layer_idx: not in Megatron");
  if (!k.boolean("scale_attn_weights", true)) problems.push_back("scale_attn_weights false: Megatron scales by 1/sqrt(d)");
  if (k.boolean("add_cross_attention", false)) problems.push_back("add_cross_attention: a decoder-only GPT has none");
  c.num_layers = static_cast<int>(k.integer("n_layer", std::nullopt));
  c.hidden_size = static_cast<int>(hidden);
  c.num_attention_heads = static_cast<int>(heads);
  c.ffn_hidden_size = static_cast<int>(k.integer("n_inner", 4 * hidden));
  c.kv_channels = heads > 0 ? static_cast<int>(hidden / heads) : 0;
  c.seq_length = c.max_position_embeddings = static_cast<int>(k.integer("n_positions", 1024));
  c.norm_epsilon = k.real("layer_norm_epsilon", 1e-5);
  c.hidden_dropout = k.real("resid_pdrop", 0.1);
  c.attention_dropout = k.real("attn_pdrop", 0.1);
  c.bias_activation_fusion = act != "gelu";
  out.tie_word_embeddings = k.boolean("tie_word_embeddings", true);
}

// What the Llama-style families share: RoPE, RMSNorm, SwiGLU, grouped-query attention; the head
// size's default is the family's (`head_dim`: hidden / heads, or Qwen3's 128). Biases are each
// family's own.
void read_llama_style(const json& hf, Keys& k, HfConfig& out, std::vector<std::string>& problems,
                      std::optional<std::int64_t> head_dim) {
  model::ModelConfig& c = out.model;
  const std::int64_t hidden = k.integer("hidden_size", std::nullopt);
  const std::int64_t heads = k.integer("num_attention_heads", std::nullopt);
  c.num_layers = static_cast<int>(k.integer("num_hidden_layers", std::nullopt));
  c.hidden_size = static_cast<int>(hidden);
  c.num_attention_heads = static_cast<int>(heads);
  c.num_query_groups = static_cast<int>(k.integer("num_key_value_heads", heads));
  c.kv_channels = static_cast<int>(k.integer("head_dim", head_dim.value_or(heads > 0 ? hidden / heads : 0)));
  c.seq_length = c.max_position_embeddings = static_cast<int>(k.integer("max_position_embeddings", 2048));
  double theta = k.real("rope_theta", 10000.0);
  if (hf.contains("rope_parameters") && hf.at("rope_parameters").is_object()) {
    const json& rp = hf.at("rope_parameters");
    Keys rope(rp, problems);
    const std::string type = rope.text("rope_type", "default");
    if (type != "default") problems.push_back("rope_parameters.rope_type " + type + ": only plain RoPE is in Megatron's GPT");
    theta = rope.real("rope_theta", theta);
  }
  if (!(theta >= 1 && theta <= 1e15 && theta == std::floor(theta))) {
    problems.push_back("rope_theta " + python_float_repr(theta) + ": megatron_train's --rotary-base is a whole number");
  }
  if (k.given("rope_scaling")) {
    problems.push_back("rope_scaling " + hf.at("rope_scaling").dump() + ": only plain RoPE is in Megatron's GPT");
  }
  const std::string act = k.text("hidden_act", "silu");
  if (act != "silu") problems.push_back("hidden_act " + act + ": SwiGLU is silu");
  c.position_embedding = model::PositionEmbedding::kRope;
  c.rotary_base = std::floor(theta);
  c.normalization = model::Normalization::kRmsNorm;
  c.norm_epsilon = k.real("rms_norm_eps", 1e-6);
  c.swiglu = true;
  c.attention_dropout = k.real("attention_dropout", 0.0);
  c.hidden_dropout = 0.0;
  c.add_bias_linear = false;
}

// A sliding window shorter than the sequence on any layer is attention Megatron's GPT does not have.
void check_window(Keys& k, const model::ModelConfig& c, bool sliding, std::vector<std::string>& problems) {
  if (!sliding || !k.given("sliding_window")) return;
  const std::int64_t window = k.integer("sliding_window", std::nullopt);
  if (window < c.max_position_embeddings) {
    problems.push_back(str_cat("sliding_window ", window, ": Megatron's GPT attends to the whole sequence (",
                               c.max_position_embeddings, " positions)"));
  }
}

void read_llama(const json& hf, Keys& k, HfConfig& out, std::vector<std::string>& problems) {
  read_llama_style(hf, k, out, problems, std::nullopt);
  out.model.ffn_hidden_size = static_cast<int>(k.integer("intermediate_size", std::nullopt));
  const bool attention_bias = k.boolean("attention_bias", false);
  if (k.boolean("mlp_bias", false) != attention_bias) {
    problems.push_back("attention_bias and mlp_bias differ: Megatron's --disable-bias-linear covers both");
  }
  out.model.add_bias_linear = attention_bias;
  out.tie_word_embeddings = k.boolean("tie_word_embeddings", false);
}

// The experts' router as Mixtral and Qwen3-MoE configure it.
void read_router(Keys& k, model::MoeConfig& m, const char* experts_key, std::vector<std::string>& problems) {
  m.router_topk = static_cast<int>(k.integer("num_experts_per_tok", 2));
  if (m.num_experts > 0 && m.router_topk > m.num_experts) {
    problems.push_back(str_cat("num_experts_per_tok ", m.router_topk, " is more than ", experts_key, " ", m.num_experts));
  }
  // Megatron's coefficient weighs each layer's loss; HF's one loss over all layers: the nearest
  // Megatron has is the same number.
  m.aux_loss_coeff = k.real("router_aux_loss_coef", 0.001);
}

// Mixtral: Llama's keys, and its experts (intermediate_size is each expert's MLP size).
void read_mixtral(const json& hf, Keys& k, HfConfig& out, std::vector<std::string>& problems) {
  read_llama_style(hf, k, out, problems, std::nullopt);
  model::ModelConfig& c = out.model;
  c.ffn_hidden_size = static_cast<int>(k.integer("intermediate_size", std::nullopt));
  model::MoeConfig& m = c.moe;
  m.num_experts = static_cast<int>(k.integer("num_local_experts", 8));
  read_router(k, m, "num_local_experts", problems);
  m.ffn_hidden_size = c.ffn_hidden_size;
  if (k.real("router_jitter_noise", 0.0) != 0.0) problems.push_back("router_jitter_noise: megatron_train has no router jitter here");
  check_window(k, c, true, problems);
  if (k.boolean("attention_bias", false)) problems.push_back("attention_bias: Mixtral's experts have no biases, and Megatron's --disable-bias-linear covers all");
  out.tie_word_embeddings = k.boolean("tie_word_embeddings", false);
}

// Qwen3 and Qwen3-MoE: no biases in the MLP (attention_bias alone is not Megatron's), RMSNorm on
// each head's queries and keys.
void read_qwen3_common(Keys& k, HfConfig& out, std::vector<std::string>& problems) {
  out.model.qk_layernorm = true;
  if (k.boolean("attention_bias", false)) {
    problems.push_back("attention_bias: Qwen3's MLP has no biases, and Megatron's --disable-bias-linear covers both");
  }
  out.tie_word_embeddings = k.boolean("tie_word_embeddings", false);
}

void read_qwen3(const json& hf, Keys& k, HfConfig& out, std::vector<std::string>& problems) {
  read_llama_style(hf, k, out, problems, 128);
  model::ModelConfig& c = out.model;
  c.ffn_hidden_size = static_cast<int>(k.integer("intermediate_size", std::nullopt));
  read_qwen3_common(k, out, problems);
  // Sliding layers: layer_types' "sliding_attention" ones, by default those from max_window_layers on.
  bool sliding = false;
  if (k.given("layer_types") && hf.at("layer_types").is_array()) {
    for (const json& type : hf.at("layer_types")) sliding = sliding || type == "sliding_attention";
  } else {
    sliding = k.integer("max_window_layers", 28, 0) < c.num_layers;
  }
  check_window(k, c, sliding && k.boolean("use_sliding_window", false), problems);
}

// Qwen3-MoE: layer i has experts unless it is among mlp_only_layers or (i + 1) is not a multiple of
// decoder_sparse_step; the others are dense MLPs of intermediate_size.
void read_qwen3_moe(const json& hf, Keys& k, HfConfig& out, std::vector<std::string>& problems) {
  read_llama_style(hf, k, out, problems, std::nullopt);
  model::ModelConfig& c = out.model;
  read_qwen3_common(k, out, problems);
  check_window(k, c, k.boolean("use_sliding_window", false), problems);
  model::MoeConfig& m = c.moe;
  // transformers writes num_local_experts (its attribute map), the hub's files num_experts.
  const char* experts_key = k.given("num_experts") ? "num_experts" : "num_local_experts";
  m.num_experts = static_cast<int>(k.integer(experts_key, 128, 0));
  read_router(k, m, experts_key, problems);
  m.router_pre_softmax = !k.boolean("norm_topk_prob", false);
  m.ffn_hidden_size = static_cast<int>(k.integer("moe_intermediate_size", 768));
  const std::int64_t step = k.integer("decoder_sparse_step", 1);
  const std::vector<std::int64_t> dense = k.integers("mlp_only_layers");
  std::vector<int> pattern;
  for (int i = 0; i < c.num_layers && step > 0; ++i) {
    const bool listed = std::find(dense.begin(), dense.end(), i) != dense.end();
    pattern.push_back(m.num_experts > 0 && !listed && (i + 1) % step == 0 ? 1 : 0);
  }
  const auto moe_layers = std::count(pattern.begin(), pattern.end(), 1);
  if (moe_layers > 0 && moe_layers < c.num_layers) m.layer_pattern = pattern;
  // Dense layers' size; unused (but a Megatron flag) when every layer has experts.
  c.ffn_hidden_size = static_cast<int>(
      k.integer("intermediate_size", moe_layers == c.num_layers ? std::optional<std::int64_t>(m.ffn_hidden_size)
                                                                 : std::nullopt));
  if (moe_layers == 0) m = model::MoeConfig{};  // a dense model (HF's num_experts 0 or no sparse layer)
}

}  // namespace

HfConfig read_hf_config(const json& hf, const std::string& where) {
  MEGATRON_CHECK(hf.is_object(), where, ": not a JSON object");
  std::vector<std::string> problems;
  Keys k(hf, problems);
  const std::string type = k.text("model_type", "");
  throw_if_problems(where, problems);
  constexpr std::array kFamilies{HfFamily::kGpt2, HfFamily::kLlama, HfFamily::kMixtral, HfFamily::kQwen3,
                                 HfFamily::kQwen3Moe};
  std::string supported = "supported are";
  for (const HfFamily f : kFamilies) {
    supported += str_cat(f == kFamilies.front() ? " " : ", ", hf_model_type(f), " (", hf_architecture(f), ")");
  }
  MEGATRON_CHECK(!type.empty(), where, ": no model_type; ", supported);
  const auto known = std::find_if(kFamilies.begin(), kFamilies.end(), [&](HfFamily f) { return type == hf_model_type(f); });
  MEGATRON_CHECK(known != kFamilies.end(), where, ": model_type '", type, "' is not supported; ", supported);
  HfConfig out;
  out.family = *known;
  model::ModelConfig& c = out.model;
  c.num_query_groups = c.kv_channels = c.ffn_hidden_size = 0;
  switch (out.family) {
    case HfFamily::kGpt2: read_gpt2(k, out, problems); break;
    case HfFamily::kLlama: read_llama(hf, k, out, problems); break;
    case HfFamily::kMixtral: read_mixtral(hf, k, out, problems); break;
    case HfFamily::kQwen3: read_qwen3(hf, k, out, problems); break;
    case HfFamily::kQwen3Moe: read_qwen3_moe(hf, k, out, problems); break;
  }
  // Token ids are 32-bit in Megatron's datasets.
  out.vocab_size = k.integer("vocab_size", std::nullopt);
  c.init_method_std = k.real("initializer_range", 0.02);
  c.derive_defaults();
  throw_if_problems(where + ": this model cannot be imported", problems, ProblemHeading::kList);
  return out;
}

std::vector<std::string> megatron_model_flags(const model::ModelConfig& c) {
  const auto str = [](double v) { return python_float_repr(v); };  // reads back as v
  std::vector<std::string> f = {"--num-layers", std::to_string(c.num_layers), "--hidden-size",
                                std::to_string(c.hidden_size), "--ffn-hidden-size", std::to_string(c.ffn_hidden_size),
                                "--num-attention-heads", std::to_string(c.num_attention_heads), "--kv-channels",
                                std::to_string(c.kv_channels), "--seq-length", std::to_string(c.seq_length),
                                "--max-position-embeddings", std::to_string(c.max_position_embeddings)};
  if (c.position_embedding == model::PositionEmbedding::kRope) {
    f.insert(f.end(), {"--position-embedding-type", "rope", "--rotary-base",
                       std::to_string(static_cast<std::int64_t>(c.rotary_base))});
  }
  if (c.normalization == model::Normalization::kRmsNorm) f.insert(f.end(), {"--normalization", "RMSNorm"});
  f.insert(f.end(), {"--norm-epsilon", str(c.norm_epsilon)});
  if (c.swiglu) f.push_back("--swiglu");
  f.insert(f.end(), {"--hidden-dropout", str(c.hidden_dropout), "--attention-dropout", str(c.attention_dropout),
                     "--init-method-std", str(c.init_method_std)});
  if (!c.swiglu && !c.bias_activation_fusion) f.push_back("--no-bias-gelu-fusion");
  if (c.num_query_groups != c.num_attention_heads) {
    f.insert(f.end(), {"--group-query-attention", "--num-query-groups", std::to_string(c.num_query_groups)});
  }
  if (!c.add_bias_linear) f.push_back("--disable-bias-linear");
  if (c.qk_layernorm) f.push_back("--qk-layernorm");
  if (c.moe.enabled()) {
    const model::MoeConfig& m = c.moe;
    f.insert(f.end(), {"--num-experts", std::to_string(m.num_experts), "--moe-router-topk",
                       std::to_string(m.router_topk), "--moe-ffn-hidden-size",
                       std::to_string(m.expert_ffn_hidden_size(c.ffn_hidden_size)), "--moe-aux-loss-coeff",
                       str(m.aux_loss_coeff), "--moe-grouped-gemm"});
    if (m.router_pre_softmax) f.push_back("--moe-router-pre-softmax");
    if (!m.layer_pattern.empty()) {
      // Megatron's list form, without spaces: one argument in a printed command line.
      std::string list = model::moe_layer_freq_text({m.layer_freq, m.layer_pattern});
      std::erase(list, ' ');
      f.insert(f.end(), {"--moe-layer-freq", list});
    }
  }
  if (c.untie_embeddings_and_output_weights) f.push_back("--untie-embeddings-and-output-weights");
  f.insert(f.end(), {"--padded-vocab-size", std::to_string(c.padded_vocab_size)});
  return f;
}

}  // namespace megatron::interop::detail
