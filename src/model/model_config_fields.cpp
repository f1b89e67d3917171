// ModelConfig's one field table (see model_config.h): each member with its JSON key (Megatron's
// argparse dest name) and the megatron_train flag that sets it. The JSON round trip, the reading of
// Megatron's arguments (a command line's resolved flags, an older checkpoint's saved arguments),
// the flags an import prints and the shape comparison on load all walk this one list.
#include <nlohmann/json.hpp>
#include <type_traits>

#include "megatron/core/check.h"
#include "megatron/core/strings.h"
#include "megatron/model/model_config.h"

namespace megatron::model {
namespace {

using nlohmann::json;

// Which flags ModelConfig::flags() writes for a field: always (the sizes, and what Megatron's
// defaults would get wrong for an imported model), where the value is not the default, or never
// (how the model computes, not what it is). A special field is written by flags() itself.
enum class Emit { kAlways, kUnlessDefault, kNever, kSpecial };

struct Field {
  const char* key;
  // The flag that sets the member's value, for a bool the one that sets the non-default value
  // (--swiglu, --disable-bias-linear); nullptr: no flag of its own.
  const char* flag = nullptr;
  Emit emit = Emit::kNever;
  bool whole = false;  // a float member whose flag takes an integer (--rotary-base)
  bool shape = false;  // gives the parameters their shapes (compared on load)
};

constexpr Emit kAlways = Emit::kAlways, kUnlessDefault = Emit::kUnlessDefault, kNever = Emit::kNever,
               kSpecial = Emit::kSpecial;

// The members in one list, for every direction: f(field, member), f.choice(field, member) for an
// enum, f.layer_freq(field, every, pattern) for --moe-layer-freq's two forms.
template <typename Config, typename F>
void visit_fields(Config& c, F& f) {
  f(Field{"num_layers", "--num-layers", kAlways, false, true}, c.num_layers);
  f(Field{"hidden_size", "--hidden-size", kAlways, false, true}, c.hidden_size);
  f(Field{"ffn_hidden_size", "--ffn-hidden-size", kAlways, false, true}, c.ffn_hidden_size);
  f(Field{"num_attention_heads", "--num-attention-heads", kAlways, false, true}, c.num_attention_heads);
  f(Field{"num_query_groups", "--num-query-groups", kSpecial, false, true}, c.num_query_groups);
  f(Field{"kv_channels", "--kv-channels", kAlways, false, true}, c.kv_channels);
  f(Field{"seq_length", "--seq-length", kAlways}, c.seq_length);
  f(Field{"max_position_embeddings", "--max-position-embeddings", kAlways, false, true}, c.max_position_embeddings);
  f.choice(Field{"position_embedding_type", "--position-embedding-type", kUnlessDefault, false, true}, c.position_embedding);
  f(Field{"rotary_base", "--rotary-base", kSpecial, true}, c.rotary_base);
  f(Field{"rotary_percent", "--rotary-percent", kUnlessDefault}, c.rotary_percent);
  f(Field{"rotary_interleaved", "--rotary-interleaved"}, c.rotary_interleaved);  // not built: never printed
  f.choice(Field{"normalization", "--normalization", kUnlessDefault, false, true}, c.normalization);
  f(Field{"norm_epsilon", "--norm-epsilon", kAlways}, c.norm_epsilon);
  f(Field{"swiglu", "--swiglu", kUnlessDefault, false, true}, c.swiglu);
  f(Field{"qk_layernorm", "--qk-layernorm", kUnlessDefault, false, true}, c.qk_layernorm);
  f(Field{"untie_embeddings_and_output_weights", "--untie-embeddings-and-output-weights", kUnlessDefault, false, true},
    c.untie_embeddings_and_output_weights);
  f(Field{"add_bias_linear", "--disable-bias-linear", kUnlessDefault, false, true}, c.add_bias_linear);
  f(Field{"init_method_std", "--init-method-std", kAlways}, c.init_method_std);
  f(Field{"attention_dropout", "--attention-dropout", kAlways}, c.attention_dropout);
  f(Field{"hidden_dropout", "--hidden-dropout", kAlways}, c.hidden_dropout);
  f(Field{"padded_vocab_size", "--padded-vocab-size", kAlways, false, true}, c.padded_vocab_size);
  f(Field{"sequence_parallel", "--sequence-parallel"}, c.sequence_parallel);
  f(Field{"bias_activation_fusion", nullptr, kSpecial}, c.bias_activation_fusion);
  f(Field{"masked_softmax_fusion", "--no-masked-softmax-fusion"}, c.masked_softmax_fusion);
  f(Field{"apply_rope_fusion", "--no-rope-fusion"}, c.apply_rope_fusion);
  f.choice(Field{"attention_backend", "--attention-backend"}, c.attention_backend);
  f.choice(Field{"recompute_granularity", "--recompute-granularity"}, c.recompute_granularity);
  f.choice(Field{"recompute_method", "--recompute-method"}, c.recompute_method);
  f(Field{"recompute_num_layers", "--recompute-num-layers"}, c.recompute_num_layers);
  f(Field{"num_experts", "--num-experts", kUnlessDefault, false, true}, c.moe.num_experts);
  f.layer_freq(Field{"moe_layer_freq", "--moe-layer-freq", kSpecial, false, true}, c.moe.layer_freq, c.moe.layer_pattern);
  f(Field{"moe_ffn_hidden_size", "--moe-ffn-hidden-size", kUnlessDefault, false, true}, c.moe.ffn_hidden_size);
  f(Field{"moe_shared_expert_intermediate_size", "--moe-shared-expert-intermediate-size", kUnlessDefault, false, true},
    c.moe.shared_expert_intermediate_size);
  f(Field{"moe_router_topk", "--moe-router-topk", kUnlessDefault}, c.moe.router_topk);
  f.choice(Field{"moe_router_score_function", "--moe-router-score-function", kUnlessDefault}, c.moe.score_function);
  f(Field{"moe_router_pre_softmax", "--moe-router-pre-softmax", kUnlessDefault}, c.moe.router_pre_softmax);
  f(Field{"moe_router_topk_scaling_factor", "--moe-router-topk-scaling-factor", kUnlessDefault},
    c.moe.router_topk_scaling_factor);
  f(Field{"moe_router_num_groups", "--moe-router-num-groups", kUnlessDefault}, c.moe.router_num_groups);
  f(Field{"moe_router_group_topk", "--moe-router-group-topk", kUnlessDefault}, c.moe.router_group_topk);
  f(Field{"moe_router_enable_expert_bias", "--moe-router-enable-expert-bias", kUnlessDefault},
    c.moe.router_enable_expert_bias);
  f(Field{"moe_router_bias_update_rate", "--moe-router-bias-update-rate", kUnlessDefault}, c.moe.router_bias_update_rate);
  f.choice(Field{"moe_router_load_balancing_type", "--moe-router-load-balancing-type", kUnlessDefault},
           c.moe.load_balancing);
  f(Field{"moe_aux_loss_coeff", "--moe-aux-loss-coeff", kUnlessDefault}, c.moe.aux_loss_coeff);
  f(Field{"moe_z_loss_coeff", "--moe-z-loss-coeff", kUnlessDefault}, c.moe.z_loss_coeff);
  f(Field{"moe_expert_capacity_factor", "--moe-expert-capacity-factor", kUnlessDefault}, c.moe.expert_capacity_factor);
  f(Field{"moe_pad_expert_input_to_capacity", "--moe-pad-expert-input-to-capacity", kUnlessDefault},
    c.moe.pad_expert_input_to_capacity);
  f.choice(Field{"moe_token_drop_policy", "--moe-token-drop-policy", kUnlessDefault}, c.moe.token_drop_policy);
  f.choice(Field{"moe_token_dispatcher_type", "--moe-token-dispatcher-type"}, c.moe.token_dispatcher);
}

// An enum as Megatron's name (the model's tables in model_config.h); a value without a name (no
// recomputation) is Megatron's None.
template <typename E>
json enum_json(E value) {
  const std::string_view name = enum_name(value);
  return name.empty() ? json(nullptr) : json(std::string(name));
}

// Reads j[key] into the member when present; the wrong type or an unknown choice names the key.
// `skip_null`: None (null) keeps the member's default, as Megatron's arguments mean it.
class Reader {
 public:
  Reader(const json& j, bool skip_null) : j_(j), skip_null_(skip_null) {}
  template <typename T>
  void operator()(const Field& f, T& member) {
    const json* v = value(f);
    if (v == nullptr) return;
    const bool ok = std::is_same_v<T, bool> ? v->is_boolean() : std::is_floating_point_v<T> ? v->is_number() : v->is_number_integer();
    MEGATRON_CHECK(ok, "model configuration: '", f.key, "' is ", v->dump(), ", not ",
                   std::is_same_v<T, bool> ? "true or false" : "a number");
    member = v->get<T>();
  }
  // An integer, the list of 0s and 1s (Megatron's two forms of --moe-layer-freq), or the flag's text.
  void layer_freq(const Field& f, int& every, std::vector<int>& pattern) {
    const json* v = value(f);
    if (v == nullptr) return;
    if (v->is_string()) {
      const MoeLayerFreq freq = parse_moe_layer_freq(v->get<std::string>());
      every = freq.every;
      pattern = freq.pattern;
      return;
    }
    if (v->is_array()) {
      pattern.clear();
      for (const json& x : *v) {
        MEGATRON_CHECK(x.is_number_integer(), "model configuration: '", f.key, "' is ", v->dump(), ", not a list of 0 and 1");
        pattern.push_back(x.get<int>());
      }
      return;
    }
    (*this)(f, every);
  }
  template <typename E>
  void choice(const Field& f, E& member) {
    const json* v = value(f);
    if (v == nullptr) return;
    const auto parsed = v->is_string() ? parse_enum<E>(v->get<std::string>())
                        : v->is_null() && enum_name(E{}).empty() ? std::optional<E>(E{})
                                                                 : std::nullopt;
    MEGATRON_CHECK(parsed.has_value(), "model configuration: '", f.key, "' is ", v->dump(), ", not one of ",
                   quoted_enum_names<E>());
    member = *parsed;
  }

 private:
  const json* value(const Field& f) const {
    const auto it = j_.find(f.key);
    if (it == j_.end() || (skip_null_ && it->is_null())) return nullptr;
    return &*it;
  }
  const json& j_;
  bool skip_null_;
};

class Writer {
 public:
  template <typename T>
  void operator()(const Field& f, const T& member) {
    j[f.key] = member;
  }
  template <typename E>
  void choice(const Field& f, const E& member) {
    j[f.key] = enum_json(member);
  }
  void layer_freq(const Field& f, int every, const std::vector<int>& pattern) {
    j[f.key] = pattern.empty() ? json(every) : json(pattern);
  }
  json j = json::object();
};

// The fields alone, in table order.
struct FieldList {
  template <typename T>
  void operator()(const Field& f, const T&) {
    fields.push_back(f);
  }
  template <typename E>
  void choice(const Field& f, const E&) {
    fields.push_back(f);
  }
  void layer_freq(const Field& f, int, const std::vector<int>&) { fields.push_back(f); }
  std::vector<Field> fields;
};

const std::vector<Field>& all_fields() {
  static const std::vector<Field> fields = [] {
    FieldList list;
    const ModelConfig c;
    visit_fields(c, list);
    return list.fields;
  }();
  return fields;
}

// A JSON value as its flag's argument: Python's repr for floats (reads back exactly).
std::string flag_value(const json& v, const Field& f) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return f.whole ? std::to_string(static_cast<std::int64_t>(v.get<double>())) : python_float_repr(v.get<double>());
  return v.dump();
}

}  // namespace

json ModelConfig::to_json() const {
  Writer w;
  visit_fields(*this, w);
  return w.j;
}

ModelConfig ModelConfig::from_json(const json& j) {
  MEGATRON_CHECK(j.is_object(), "model configuration: expected a JSON object, got ", j.dump());
  ModelConfig c;
  Reader r(j, false);
  visit_fields(c, r);
  return c;
}

ModelConfig ModelConfig::from_arguments(const json& arguments) {
  MEGATRON_CHECK(arguments.is_object(), "Megatron arguments: expected a JSON object, got ", arguments.dump());
  ModelConfig c;
  Reader r(arguments, true);
  visit_fields(c, r);
  const auto flag = [&](const char* key, bool fallback) {
    const auto it = arguments.find(key);
    return it != arguments.end() && it->is_boolean() ? it->get<bool>() : fallback;
  };
  // Megatron's derivations: query groups only with grouped-query attention; the MLP's kind picks
  // the activation's fusion flag; the experts' settings only with experts.
  if (!flag("group_query_attention", false)) c.num_query_groups = c.num_attention_heads;
  c.bias_activation_fusion = flag(c.swiglu ? "bias_swiglu_fusion" : "bias_gelu_fusion", true);
  if (!c.moe.enabled()) c.moe = MoeConfig{};
  // The resolved vocabulary: under its own key in checkpoints saved before the model had one.
  if (const auto it = arguments.find("padded_vocab_size_resolved"); it != arguments.end() && it->is_number_integer()) {
    c.padded_vocab_size = it->get<std::int64_t>();
  }
  return c;
}

std::vector<std::string> ModelConfig::flags() const {
  const json mine = to_json(), defaults = ModelConfig{}.to_json();
  std::vector<std::string> out;
  for (const Field& f : all_fields()) {
    const json& v = mine.at(f.key);
    if (f.emit == Emit::kNever || f.emit == Emit::kSpecial) continue;
    if (f.emit == Emit::kUnlessDefault && v == defaults.at(f.key)) continue;
    if (v.is_boolean()) {
      out.push_back(f.flag);  // the flag that sets the value that is not the default
    } else {
      out.insert(out.end(), {f.flag, flag_value(v, f)});
    }
  }
  if (num_query_groups != num_attention_heads) {
    out.insert(out.end(), {"--group-query-attention", "--num-query-groups", std::to_string(num_query_groups)});
  }
  if (position_embedding == PositionEmbedding::kRope) {
    out.insert(out.end(), {"--rotary-base", std::to_string(static_cast<std::int64_t>(rotary_base))});
  }
  if (!bias_activation_fusion) out.push_back(swiglu ? "--no-bias-swiglu-fusion" : "--no-bias-gelu-fusion");
  if (moe.enabled() && (!moe.layer_pattern.empty() || moe.layer_freq != 1)) {
    // Megatron's list form without spaces: one argument in a printed command line.
    std::string freq = moe_layer_freq_text({moe.layer_freq, moe.layer_pattern});
    std::erase(freq, ' ');
    out.insert(out.end(), {"--moe-layer-freq", freq});
  }
  return out;
}

namespace {

// The config with the sizes that shape no tensor of it cleared: the dense MLP size when every
// layer has experts, the experts' sizes without experts, the position table's length without
// learned positions; the experts' MLP size resolved (unset means --ffn-hidden-size).
ModelConfig shaping_only(ModelConfig c) {
  if (c.moe.enabled()) c.moe.ffn_hidden_size = c.moe.expert_ffn_hidden_size(c.ffn_hidden_size);
  if (c.moe.enabled() && c.moe.num_moe_layers(c.num_layers) == c.num_layers) c.ffn_hidden_size = 0;
  if (!c.moe.enabled()) c.moe = MoeConfig{};
  if (c.position_embedding != PositionEmbedding::kLearnedAbsolute) c.max_position_embeddings = 0;
  return c;
}

}  // namespace

std::vector<std::string> ModelConfig::shape_differences_from(const ModelConfig& saved) const {
  const json a = saved.to_json(), b = to_json();
  const json shaping_a = shaping_only(saved).to_json(), shaping_b = shaping_only(*this).to_json();
  std::vector<std::string> out;
  for (const Field& f : all_fields()) {
    if (f.shape && shaping_a.at(f.key) != shaping_b.at(f.key)) {
      out.push_back(str_cat(f.key, ": checkpoint ", a.at(f.key).dump(), ", command line ", b.at(f.key).dump()));
    }
  }
  return out;
}

std::vector<std::string> ModelConfig::setting_differences_from(const ModelConfig& saved) const {
  const json a = saved.to_json(), b = to_json();
  const json shaping_a = shaping_only(saved).to_json(), shaping_b = shaping_only(*this).to_json();
  std::vector<std::string> out;
  for (const Field& f : all_fields()) {
    // Settings a Megatron flag sets, and sizes no tensor depends on; the shapes that differ are
    // shape_differences_from's.
    if (f.emit == Emit::kNever || a.at(f.key) == b.at(f.key)) continue;
    if (f.shape && shaping_a.at(f.key) != shaping_b.at(f.key)) continue;
    out.push_back(str_cat(f.key, " ", b.at(f.key).dump(), " (the checkpoint's run had ", a.at(f.key).dump(), ")"));
  }
  return out;
}

}  // namespace megatron::model
