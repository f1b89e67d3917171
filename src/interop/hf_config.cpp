// config.json as Megatron's model (see hf_config.h).
#include "hf_config.h"

#include <optional>

#include "hf_family.h"
#include "megatron/core/check.h"
#include "megatron/core/strings.h"

namespace megatron::interop::detail {

using nlohmann::json;

HfConfig read_hf_config(const json& hf, const std::string& where) {
  MEGATRON_CHECK(hf.is_object(), where, ": not a JSON object");
  Problems problems;
  HfConfigKeys k(hf, problems);
  const std::string type = k.text("model_type", "");
  throw_if_problems(where, problems);
  std::string supported = "supported are";
  const HfFamilySpec* spec = nullptr;
  for (const HfFamilySpec* f : hf_families()) {
    supported += str_cat(f == hf_families().front() ? " " : ", ", f->model_type, " (", f->architecture, ")");
    if (type == f->model_type) spec = f;
  }
  MEGATRON_CHECK(!type.empty(), where, ": no model_type; ", supported);
  MEGATRON_CHECK(spec != nullptr, where, ": model_type '", type, "' is not supported; ", supported);
  HfConfig out;
  out.family = spec->family;
  model::ModelConfig& c = out.model;
  c.num_query_groups = c.kv_channels = c.ffn_hidden_size = 0;
  spec->read_config(hf, k, out, problems);
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
