// A HuggingFace config.json read as Megatron's model (private to src/interop): model_type picks the
// family's descriptor (hf_family.h), whose reader takes the keys transformers' config of that
// family reads, with transformers' defaults (n_inner, num_key_value_heads, head_dim, the experts'
// counts). Integers are read as integers, range-checked; nothing is narrowed.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "megatron/interop/huggingface.h"
#include "megatron/model/model_config.h"

namespace megatron::interop::detail {

struct HfConfig {
  HfFamily family = HfFamily::kGpt2;
  // Sizes, norms, positions and dropout as config.json gives them, defaults derived;
  // padded_vocab_size and the tie are left to the importer (the tensors decide the tie).
  model::ModelConfig model;
  std::int64_t vocab_size = 0;
  bool tie_word_embeddings = true;  // as config.json says (or the family's default)
};

// Reads config.json (already parsed; `where` names it in messages). Throws megatron::Error: an
// unsupported or missing model_type alone; otherwise every key that is missing, of the wrong
// type, out of range, or a setting Megatron's GPT does not have, together.
HfConfig read_hf_config(const nlohmann::json& hf, const std::string& where);

}  // namespace megatron::interop::detail
