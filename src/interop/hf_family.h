// One descriptor per HuggingFace family (private to src/interop): transformers' class and
// model_type, config.json's keys both ways, and the tensor map Megatron name <-> HF names with the
// transform between them. Export, import and the import's shape check all read the same map, so a
// family lives in one file (hf_gpt2.cpp, hf_llama.cpp) and a new one is one more descriptor.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "hf_config.h"
#include "hf_config_keys.h"
#include "hf_layout.h"
#include "megatron/interop/huggingface.h"
#include "megatron/model/model_config.h"

namespace megatron::interop::detail {

// What transformers' config class gives a Llama-style config.json key that is absent (each
// family's own; test_hf_config checks them against transformers' AutoConfig).
struct HfDefaults {
  std::int64_t max_position_embeddings = 2048;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;
  std::int64_t num_key_value_heads = 0;  // 0: num_attention_heads
  std::int64_t head_dim = 0;             // 0: hidden_size / num_attention_heads
  std::int64_t num_experts = 0;
  std::int64_t num_experts_per_tok = 0;
};

struct HfFamilySpec {
  HfFamily family;
  const char* architecture;  // transformers' class
  const char* model_type;    // config.json's model_type
  const char* name;          // in messages
  const char* layers_key;    // config.json's layer count
  const char* layer_prefix;  // HF's prefix of a transformer layer's tensors, before its index
  const char* embedding;     // the word embedding's HF name (what a tied lm_head is)
  // Given to names a file holds without it (OpenAI's original GPT-2 files); nullptr: none.
  const char* bare_prefix = nullptr;
  // An MoE layer's tensors under its layer prefix ("model.layers.<i>."): the router and each
  // expert's gate, up and down projections as <experts><j>.<projection>. nullptr: no experts.
  const char* router = nullptr;
  const char* experts = nullptr;
  std::array<const char*, 3> expert_projections{};
  bool qk_norms = false;  // self_attn.q_norm / k_norm
  HfDefaults defaults{};
  // config.json -> Megatron's model; problems collected, not thrown.
  void (*read_config)(const HfFamilySpec& spec, const nlohmann::json& hf, HfConfigKeys& keys, HfConfig& out,
                      Problems& problems) = nullptr;
  // Megatron's model -> config.json, without the token ids, tie, cache and dtype the export adds.
  nlohmann::ordered_json (*write_config)(const HfFamilySpec& spec, const model::ModelConfig& c,
                                         std::int64_t vocab) = nullptr;
  // Every tensor of the family's file for `c` with a `vocab`-row embedding; lm_head.weight when
  // the output layer is untied.
  HfTensorMap (*tensor_map)(const HfFamilySpec& spec, const model::ModelConfig& c, std::int64_t vocab) = nullptr;

  bool has_experts() const { return router != nullptr; }
  // An expert's projection name: `which` 0 gate, 1 up, 2 down.
  std::string expert_name(const std::string& layer, int expert, int which) const {
    return layer + experts + std::to_string(expert) + "." + expert_projections[which] + ".weight";
  }
};

// Every family, in the order messages list them; and one by its enum.
std::span<const HfFamilySpec* const> hf_families();
const HfFamilySpec& hf_family(HfFamily family);

// The families' own descriptors (hf_gpt2.cpp, hf_llama.cpp).
const HfFamilySpec& gpt2_family();
std::span<const HfFamilySpec* const> llama_style_families();

// "model.layers.7." for a family's layer i.
inline std::string hf_layer(const HfFamilySpec& spec, int i) { return spec.layer_prefix + std::to_string(i) + "."; }
// "decoder.layers.7.<rest>": a Megatron layer's parameter.
inline std::string megatron_layer(int i, const char* rest) { return "decoder.layers." + std::to_string(i) + "." + rest; }

}  // namespace megatron::interop::detail
