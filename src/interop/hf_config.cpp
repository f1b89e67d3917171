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
  spec->read_config(*spec, hf, k, out, problems);
  // Token ids are 32-bit in Megatron's datasets.
  out.vocab_size = k.integer("vocab_size", std::nullopt);
  c.init_method_std = k.real("initializer_range", 0.02);
  c.derive_defaults();
  throw_if_problems(where + ": this model cannot be imported", problems, ProblemHeading::kList);
  return out;
}

}  // namespace megatron::interop::detail
