// The Llama-style families as descriptors (see hf_family.h): RoPE (rotate-half, whole head),
// RMSNorm, SwiGLU, grouped-query attention, separate q/k/v and gate/up projections.
//   - LlamaForCausalLM: any number of query groups, with or without linear biases.
//   - MixtralForCausalLM: experts in every layer (softmax router, top-k renormalised: Megatron's
//     default routing), the hub's block_sparse_moe.experts.<j>.w1/w3/w2, no biases.
//   - Qwen3ForCausalLM: no biases, --qk-layernorm (q_norm / k_norm before RoPE), any head size.
//   - Qwen3MoeForCausalLM: Qwen3's attention with experts in the layers --moe-layer-freq picks
//     (mlp_only_layers the others), norm_topk_prob or --moe-router-pre-softmax, the hub's
//     mlp.experts.<j>.gate_proj/up_proj/down_proj.
#include <algorithm>
#include <cmath>
#include <optional>

#include "hf_family.h"
#include "megatron/core/strings.h"

namespace megatron::interop::detail {
namespace {

using nlohmann::json;

// What the Llama-style families share: RoPE, RMSNorm, SwiGLU, grouped-query attention; the head
// size's default is the family's (`head_dim`: hidden / heads, or Qwen3's 128). Biases are each
// family's own.
void read_llama_style(const HfFamilySpec& spec, const json& hf, HfConfigKeys& k, HfConfig& out, Problems& problems) {
  const HfDefaults& d = spec.defaults;
  model::ModelConfig& c = out.model;
  const std::int64_t hidden = k.integer("hidden_size", std::nullopt);
  const std::int64_t heads = k.integer("num_attention_heads", std::nullopt);
  c.num_layers = static_cast<int>(k.integer("num_hidden_layers", std::nullopt));
  c.hidden_size = static_cast<int>(hidden);
  c.num_attention_heads = static_cast<int>(heads);
  c.num_query_groups = static_cast<int>(k.integer("num_key_value_heads", d.num_key_value_heads > 0 ? d.num_key_value_heads : heads));
  c.kv_channels = static_cast<int>(k.integer("head_dim", d.head_dim > 0 ? d.head_dim : heads > 0 ? hidden / heads : 0));
  c.seq_length = c.max_position_embeddings = static_cast<int>(k.integer("max_position_embeddings", d.max_position_embeddings));
  double theta = k.real("rope_theta", d.rope_theta);
  if (hf.contains("rope_parameters") && hf.at("rope_parameters").is_object()) {
    const json& rp = hf.at("rope_parameters");
    HfConfigKeys rope(rp, problems);
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
  c.norm_epsilon = k.real("rms_norm_eps", d.rms_norm_eps);
  c.swiglu = true;
  c.attention_dropout = k.real("attention_dropout", 0.0);
  c.hidden_dropout = 0.0;
  c.add_bias_linear = false;
}

// A sliding window shorter than the sequence on any layer is attention Megatron's GPT does not have.
void check_window(HfConfigKeys& k, const model::ModelConfig& c, bool sliding, Problems& problems) {
  if (!sliding || !k.given("sliding_window")) return;
  const std::int64_t window = k.integer("sliding_window", std::nullopt);
  if (window < c.max_position_embeddings) {
    problems.push_back(str_cat("sliding_window ", window, ": Megatron's GPT attends to the whole sequence (",
                               c.max_position_embeddings, " positions)"));
  }
}

void read_llama(const HfFamilySpec& spec, const json& hf, HfConfigKeys& k, HfConfig& out, Problems& problems) {
  read_llama_style(spec, hf, k, out, problems);
  out.model.ffn_hidden_size = static_cast<int>(k.integer("intermediate_size", std::nullopt));
  const bool attention_bias = k.boolean("attention_bias", false);
  if (k.boolean("mlp_bias", false) != attention_bias) {
    problems.push_back("attention_bias and mlp_bias differ: Megatron's --disable-bias-linear covers both");
  }
  out.model.add_bias_linear = attention_bias;
  out.tie_word_embeddings = k.boolean("tie_word_embeddings", false);
}

// The experts' router as Mixtral and Qwen3-MoE configure it.
void read_router(const HfFamilySpec& spec, HfConfigKeys& k, model::MoeConfig& m, const char* experts_key, Problems& problems) {
  m.router_topk = static_cast<int>(k.integer("num_experts_per_tok", spec.defaults.num_experts_per_tok));
  if (m.num_experts > 0 && m.router_topk > m.num_experts) {
    problems.push_back(str_cat("num_experts_per_tok ", m.router_topk, " is more than ", experts_key, " ", m.num_experts));
  }
  // Megatron's coefficient weighs each layer's loss; HF's one loss over all layers: the nearest
  // Megatron has is the same number.
  m.aux_loss_coeff = k.real("router_aux_loss_coef", 0.001);
}

// One expert per token weighed by the softmax of its own logit alone, 1: Megatron's router has no
// such setting (top-1 needs --moe-router-pre-softmax, which weighs the expert by its probability).
void check_top1(const model::MoeConfig& m, const char* why, Problems& problems) {
  if (m.router_topk != 1 || m.router_pre_softmax) return;
  problems.push_back(str_cat("num_experts_per_tok 1", why, ": each token's one expert is weighed by 1 (the softmax of its "
                             "logit alone); Megatron routes one expert per token only with the softmax over all "
                             "experts before the choice (--moe-router-pre-softmax), which weighs it by its probability"));
}

// Mixtral: Llama's keys, and its experts (intermediate_size is each expert's MLP size).
void read_mixtral(const HfFamilySpec& spec, const json& hf, HfConfigKeys& k, HfConfig& out, Problems& problems) {
  read_llama_style(spec, hf, k, out, problems);
  model::ModelConfig& c = out.model;
  c.ffn_hidden_size = static_cast<int>(k.integer("intermediate_size", std::nullopt));
  model::MoeConfig& m = c.moe;
  m.num_experts = static_cast<int>(k.integer("num_local_experts", spec.defaults.num_experts));
  read_router(spec, k, m, "num_local_experts", problems);
  m.ffn_hidden_size = c.ffn_hidden_size;
  check_top1(m, "", problems);
  if (k.real("router_jitter_noise", 0.0) != 0.0) problems.push_back("router_jitter_noise: megatron_train has no router jitter here");
  check_window(k, c, true, problems);
  if (k.boolean("attention_bias", false)) problems.push_back("attention_bias: Mixtral's experts have no biases, and Megatron's --disable-bias-linear covers all");
  out.tie_word_embeddings = k.boolean("tie_word_embeddings", false);
}

// Qwen3 and Qwen3-MoE: no biases in the MLP (attention_bias alone is not Megatron's), RMSNorm on
// each head's queries and keys.
void read_qwen3_common(HfConfigKeys& k, HfConfig& out, Problems& problems) {
  out.model.qk_layernorm = true;
  if (k.boolean("attention_bias", false)) {
    problems.push_back("attention_bias: Qwen3's MLP has no biases, and Megatron's --disable-bias-linear covers both");
  }
  out.tie_word_embeddings = k.boolean("tie_word_embeddings", false);
}

void read_qwen3(const HfFamilySpec& spec, const json& hf, HfConfigKeys& k, HfConfig& out, Problems& problems) {
  read_llama_style(spec, hf, k, out, problems);
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
void read_qwen3_moe(const HfFamilySpec& spec, const json& hf, HfConfigKeys& k, HfConfig& out, Problems& problems) {
  read_llama_style(spec, hf, k, out, problems);
  model::ModelConfig& c = out.model;
  read_qwen3_common(k, out, problems);
  check_window(k, c, k.boolean("use_sliding_window", false), problems);
  model::MoeConfig& m = c.moe;
  // transformers writes num_local_experts (its attribute map), the hub's files num_experts.
  const char* experts_key = k.given("num_experts") ? "num_experts" : "num_local_experts";
  m.num_experts = static_cast<int>(k.integer(experts_key, spec.defaults.num_experts, 0));
  read_router(spec, k, m, experts_key, problems);
  m.router_pre_softmax = !k.boolean("norm_topk_prob", false);
  check_top1(m, " with norm_topk_prob", problems);
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

// config.json's keys the four families share, without the token ids, tie and dtype.
nlohmann::ordered_json llama_style_config(const HfFamilySpec& spec, const model::ModelConfig& c, std::int64_t vocab) {
  return {{"architectures", {spec.architecture}},
          {"model_type", spec.model_type},
          {"vocab_size", vocab},
          {"hidden_size", c.hidden_size},
          {"intermediate_size", c.ffn_hidden_size},
          {"num_hidden_layers", c.num_layers},
          {"num_attention_heads", c.num_attention_heads},
          {"num_key_value_heads", c.num_query_groups},
          {"head_dim", c.kv_channels},
          {"hidden_act", "silu"},
          {"max_position_embeddings", c.max_position_embeddings},
          {"rms_norm_eps", c.norm_epsilon},
          {"rope_theta", c.rotary_base},
          {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", c.rotary_base}}},
          {"attention_bias", c.add_bias_linear},
          {"attention_dropout", c.attention_dropout},
          {"initializer_range", c.init_method_std}};
}

nlohmann::ordered_json write_llama(const HfFamilySpec& spec, const model::ModelConfig& c, std::int64_t vocab) {
  nlohmann::ordered_json j = llama_style_config(spec, c, vocab);
  j["mlp_bias"] = c.add_bias_linear;
  return j;
}

nlohmann::ordered_json write_mixtral(const HfFamilySpec& spec, const model::ModelConfig& c, std::int64_t vocab) {
  nlohmann::ordered_json j = llama_style_config(spec, c, vocab);
  const model::MoeConfig& m = c.moe;
  j.erase("attention_bias");
  j["intermediate_size"] = m.expert_ffn_hidden_size(c.ffn_hidden_size);
  j["num_local_experts"] = m.num_experts;
  j["num_experts_per_tok"] = m.router_topk;
  j["router_aux_loss_coef"] = m.aux_loss_coeff;
  j["output_router_logits"] = false;
  j["router_jitter_noise"] = 0.0;
  j["sliding_window"] = nullptr;
  return j;
}

nlohmann::ordered_json write_qwen3(const HfFamilySpec& spec, const model::ModelConfig& c, std::int64_t vocab) {
  nlohmann::ordered_json j = llama_style_config(spec, c, vocab);
  j["use_sliding_window"] = false;
  j["sliding_window"] = nullptr;
  j["max_window_layers"] = c.num_layers;
  return j;
}

// Dense layers by their index (decoder_sparse_step 1 puts experts everywhere else).
nlohmann::ordered_json write_qwen3_moe(const HfFamilySpec& spec, const model::ModelConfig& c, std::int64_t vocab) {
  nlohmann::ordered_json j = write_qwen3(spec, c, vocab);
  const model::MoeConfig& m = c.moe;
  j["num_experts"] = m.num_experts;
  j["num_experts_per_tok"] = m.router_topk;
  j["moe_intermediate_size"] = m.expert_ffn_hidden_size(c.ffn_hidden_size);
  j["norm_topk_prob"] = !m.router_pre_softmax;
  j["decoder_sparse_step"] = 1;
  j["mlp_only_layers"] = nlohmann::ordered_json::array();
  for (int i = 0; i < c.num_layers; ++i) {
    if (!m.is_moe_layer(i)) j["mlp_only_layers"].push_back(i);
  }
  j["router_aux_loss_coef"] = m.aux_loss_coeff;
  j["output_router_logits"] = false;
  return j;
}

HfTensorMap llama_style_tensors(const HfFamilySpec& spec, const model::ModelConfig& c, std::int64_t vocab) {
  using T = HfTransform;
  // In 64 bits: the sizes come from config.json and their products may pass 2^31.
  const std::int64_t h = c.hidden_size, ffn = c.ffn_hidden_size, hn = c.kv_channels;
  const std::int64_t q = c.num_attention_heads * hn, kv = c.num_query_groups * hn;
  HfTensorMap m;
  auto add = [&](std::string megatron, T transform, std::vector<std::string> hf, std::vector<HfShape> shapes) {
    m.push_back({std::move(megatron), transform, std::move(hf), std::move(shapes)});
  };
  auto same = [&](std::string megatron, const std::string& hf, HfShape shape) {
    add(std::move(megatron), T::kSame, {hf}, {std::move(shape)});
  };
  add("embedding.word_embeddings.weight", T::kVocabRows, {"model.embed_tokens.weight"}, {{vocab, h}});
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = hf_layer(spec, i), a = p + "self_attn.", mlp = p + "mlp.";
    const auto layer = [i](const char* rest) { return megatron_layer(i, rest); };
    same(layer("input_layernorm.weight"), p + "input_layernorm.weight", {h});
    add(layer("self_attention.linear_qkv.weight"), T::kQkv,
        {a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"}, {{q, h}, {kv, h}, {kv, h}});
    same(layer("self_attention.linear_proj.weight"), a + "o_proj.weight", {h, q});
    if (c.add_bias_linear) {
      add(layer("self_attention.linear_qkv.bias"), T::kQkv, {a + "q_proj.bias", a + "k_proj.bias", a + "v_proj.bias"},
          {{q}, {kv}, {kv}});
      same(layer("self_attention.linear_proj.bias"), a + "o_proj.bias", {h});
    }
    if (spec.qk_norms) {
      same(layer("self_attention.q_layernorm.weight"), a + "q_norm.weight", {hn});
      same(layer("self_attention.k_layernorm.weight"), a + "k_norm.weight", {hn});
    }
    if (spec.has_experts() && c.moe.is_moe_layer(i)) {
      const int experts = c.moe.num_experts;
      const std::int64_t f = c.moe.expert_ffn_hidden_size(c.ffn_hidden_size);
      same(layer("mlp.router.weight"), p + spec.router, {experts, h});
      std::vector<std::string> gate_up, down;
      for (int e = 0; e < experts; ++e) {
        gate_up.insert(gate_up.end(), {spec.expert_name(p, e, 0), spec.expert_name(p, e, 1)});
        down.push_back(spec.expert_name(p, e, 2));
      }
      add(layer("mlp.experts.linear_fc1.weight"), T::kExpertsGateUp, gate_up, std::vector<HfShape>(2 * experts, {f, h}));
      add(layer("mlp.experts.linear_fc2.weight"), T::kExperts, down, std::vector<HfShape>(experts, {h, f}));
    } else {
      add(layer("mlp.linear_fc1.weight"), T::kGateUp, {mlp + "gate_proj.weight", mlp + "up_proj.weight"},
          {{ffn, h}, {ffn, h}});
      same(layer("mlp.linear_fc2.weight"), mlp + "down_proj.weight", {h, ffn});
      if (c.add_bias_linear) {
        add(layer("mlp.linear_fc1.bias"), T::kGateUp, {mlp + "gate_proj.bias", mlp + "up_proj.bias"}, {{ffn}, {ffn}});
        same(layer("mlp.linear_fc2.bias"), mlp + "down_proj.bias", {h});
      }
    }
    same(layer("pre_mlp_layernorm.weight"), p + "post_attention_layernorm.weight", {h});
  }
  same("decoder.final_layernorm.weight", "model.norm.weight", {h});
  if (c.untie_embeddings_and_output_weights) add("output_layer.weight", T::kVocabRows, {"lm_head.weight"}, {{vocab, h}});
  return m;
}

// What the four descriptors share.
constexpr HfFamilySpec llama_style(HfFamily family, const char* architecture, const char* model_type, const char* name) {
  return {.family = family,
          .architecture = architecture,
          .model_type = model_type,
          .name = name,
          .layers_key = "num_hidden_layers",
          .layer_prefix = "model.layers.",
          .embedding = "model.embed_tokens.weight",
          .tensor_map = llama_style_tensors};
}

HfFamilySpec with(HfFamilySpec spec, auto&& change) {
  change(spec);
  return spec;
}

}  // namespace

std::span<const HfFamilySpec* const> llama_style_families() {
  static const HfFamilySpec llama = with(llama_style(HfFamily::kLlama, "LlamaForCausalLM", "llama", "Llama"), [](auto& s) {
    s.read_config = read_llama;
    s.write_config = write_llama;
  });
  static const HfFamilySpec mixtral =
      with(llama_style(HfFamily::kMixtral, "MixtralForCausalLM", "mixtral", "Mixtral"), [](auto& s) {
        s.router = "block_sparse_moe.gate.weight";
        s.experts = "block_sparse_moe.experts.";
        s.expert_projections = {"w1", "w3", "w2"};
        s.read_config = read_mixtral;
        s.defaults = {.max_position_embeddings = 131072, .rope_theta = 1e6, .rms_norm_eps = 1e-5, .num_key_value_heads = 8,
                      .num_experts = 8, .num_experts_per_tok = 2};
        s.write_config = write_mixtral;
      });
  static const HfFamilySpec qwen3 = with(llama_style(HfFamily::kQwen3, "Qwen3ForCausalLM", "qwen3", "Qwen3"), [](auto& s) {
    s.qk_norms = true;
    s.read_config = read_qwen3;
    s.defaults = {.max_position_embeddings = 32768, .num_key_value_heads = 32, .head_dim = 128};
    s.write_config = write_qwen3;
  });
  static const HfFamilySpec qwen3_moe =
      with(llama_style(HfFamily::kQwen3Moe, "Qwen3MoeForCausalLM", "qwen3_moe", "Qwen3-MoE"), [](auto& s) {
        s.router = "mlp.gate.weight";
        s.experts = "mlp.experts.";
        s.expert_projections = {"gate_proj", "up_proj", "down_proj"};
        s.qk_norms = true;
        s.read_config = read_qwen3_moe;
        s.defaults = {.max_position_embeddings = 32768, .num_key_value_heads = 4, .num_experts = 128, .num_experts_per_tok = 8};
        s.write_config = write_qwen3_moe;
      });
  static const HfFamilySpec* const all[] = {&llama, &mixtral, &qwen3, &qwen3_moe};
  return all;
}

}  // namespace megatron::interop::detail
