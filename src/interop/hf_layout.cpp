// HuggingFace's tensor layouts against Megatron's (see hf_layout.h).
#include "hf_layout.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <vector>

#include "hf_family.h"
#include "megatron/checkpoint/safetensors.h"
#include "megatron/core/check.h"
#include "megatron/core/file_io.h"

namespace megatron::interop::detail {

Qkv split_qkv(const at::Tensor& w, const model::ModelConfig& c) {
  const std::int64_t ng = c.num_query_groups, hn = c.kv_channels, per = c.num_attention_heads / ng;
  const auto rest = w.sizes().slice(1).vec();  // [h] for weights, [] for biases
  std::vector<std::int64_t> grouped{ng, (per + 2) * hn};
  grouped.insert(grouped.end(), rest.begin(), rest.end());
  const at::Tensor g = w.reshape(grouped);
  auto rows = [&](std::int64_t begin, std::int64_t count, std::int64_t heads) {
    std::vector<std::int64_t> shape{heads * hn};
    shape.insert(shape.end(), rest.begin(), rest.end());
    return g.narrow(1, begin, count).reshape(shape).contiguous();
  };
  return {rows(0, per * hn, ng * per), rows(per * hn, hn, ng), rows((per + 1) * hn, hn, ng)};
}

at::Tensor join_qkv(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const model::ModelConfig& c) {
  const std::int64_t ng = c.num_query_groups, hn = c.kv_channels, per = c.num_attention_heads / ng;
  const auto rest = q.sizes().slice(1).vec();
  auto grouped = [&](const at::Tensor& t, std::int64_t rows) {
    std::vector<std::int64_t> shape{ng, rows};
    shape.insert(shape.end(), rest.begin(), rest.end());
    return t.reshape(shape);
  };
  std::vector<std::int64_t> shape{c.qkv_size()};
  shape.insert(shape.end(), rest.begin(), rest.end());
  return at::cat({grouped(q, per * hn), grouped(k, hn), grouped(v, hn)}, 1).reshape(shape).contiguous();
}

std::vector<at::Tensor> to_hf_tensors(const HfTensorRule& rule, const at::Tensor& m, const model::ModelConfig& c) {
  switch (rule.transform) {
    case HfTransform::kSame: return {m};
    case HfTransform::kTranspose: return {m.t()};
    case HfTransform::kVocabRows: return {m.narrow(0, 0, rule.shapes[0][0])};
    case HfTransform::kQkv: {
      const Qkv x = split_qkv(m, c);
      return {x.q, x.k, x.v};
    }
    case HfTransform::kQkvConcat:
    case HfTransform::kQkvConv1d: {
      const Qkv x = split_qkv(m, c);
      const at::Tensor rows = at::cat({x.q, x.k, x.v}, 0);
      return {rule.transform == HfTransform::kQkvConv1d ? rows.t() : rows};
    }
    case HfTransform::kGateUp: {
      const std::int64_t f = m.size(0) / 2;
      return {m.narrow(0, 0, f), m.narrow(0, f, f)};
    }
    case HfTransform::kExpertsGateUp: {
      std::vector<at::Tensor> out;
      const std::int64_t f = m.size(1) / 2;
      for (std::int64_t e = 0; e < m.size(0); ++e) {
        out.push_back(m[e].narrow(0, 0, f));
        out.push_back(m[e].narrow(0, f, f));
      }
      return out;
    }
    case HfTransform::kExperts: return m.unbind(0);
  }
  MEGATRON_FAIL("internal error: unknown HF transform");
}

at::Tensor from_hf_tensors(const HfTensorRule& rule, const std::vector<at::Tensor>& t, const model::ModelConfig& c) {
  switch (rule.transform) {
    case HfTransform::kSame: return t[0];
    case HfTransform::kTranspose: return t[0].t();
    case HfTransform::kVocabRows: {
      const std::int64_t padding = c.padded_vocab_size - t[0].size(0);
      return padding == 0 ? t[0] : at::cat({t[0], at::zeros({padding, t[0].size(1)}, t[0].options())}, 0);
    }
    case HfTransform::kQkv: return join_qkv(t[0], t[1], t[2], c);
    case HfTransform::kQkvConcat:
    case HfTransform::kQkvConv1d: {
      const auto qkv = (rule.transform == HfTransform::kQkvConv1d ? t[0].t() : t[0]).chunk(3, 0);
      return join_qkv(qkv[0], qkv[1], qkv[2], c);
    }
    case HfTransform::kGateUp: return at::cat({t[0], t[1]}, 0);
    case HfTransform::kExpertsGateUp: {
      std::vector<at::Tensor> experts;
      for (std::size_t e = 0; e + 1 < t.size(); e += 2) experts.push_back(at::cat({t[e], t[e + 1]}, 0));
      return at::stack(experts);
    }
    case HfTransform::kExperts: return at::stack(t);
  }
  MEGATRON_FAIL("internal error: unknown HF transform");
}

std::map<std::string, at::Tensor> read_hf_tensors(const std::filesystem::path& dir, HfFamily family) {
  std::vector<std::string> files;
  const std::filesystem::path index = dir / "model.safetensors.index.json";
  if (std::filesystem::exists(index)) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_text_file(index.string(), "HF index"));
      std::set<std::string> unique;
      for (const auto& [name, file] : j.at("weight_map").items()) unique.insert(file.get<std::string>());
      files.assign(unique.begin(), unique.end());
    } catch (const nlohmann::json::exception& e) {
      MEGATRON_FAIL(index.string(), ": not a safetensors index (", e.what(), ")");
    }
  } else {
    MEGATRON_CHECK(std::filesystem::exists(dir / "model.safetensors"), dir.string(),
                   " has neither model.safetensors nor model.safetensors.index.json (save with "
                   "save_pretrained(..., safe_serialization=True))");
    files.push_back("model.safetensors");
  }
  const char* bare = hf_family(family).bare_prefix;
  std::map<std::string, at::Tensor> out;
  for (const auto& file : files) {
    for (auto& [name, t] : checkpoint::read_safetensors((dir / file).string()).tensors) {
      const bool add = bare != nullptr && !name.starts_with(bare) && !name.starts_with("lm_head.");
      out[add ? bare + name : name] = t.to(at::kFloat).contiguous();
    }
  }
  return out;
}

void split_fused_experts(std::map<std::string, at::Tensor>& tensors, HfFamily family) {
  const HfFamilySpec& spec = hf_family(family);
  if (!spec.has_experts()) return;
  constexpr std::string_view kGateUp = "mlp.experts.gate_up_proj", kDown = "mlp.experts.down_proj";
  constexpr const char* kMemoryRouter = "mlp.gate.weight";  // transformers 5 keeps every family's router here
  std::vector<std::string> fused;
  for (const auto& [name, t] : tensors) {
    if (name.ends_with(kGateUp) || name.ends_with(kDown)) fused.push_back(name);
  }
  for (const std::string& name : fused) {
    const bool gate_up = name.ends_with(kGateUp);
    const std::string layer = name.substr(0, name.size() - (gate_up ? kGateUp : kDown).size());
    const at::Tensor t = tensors.at(name);
    tensors.erase(name);
    // A 3-D stack of experts; anything else stays under its own name for the shape check to report.
    if (t.dim() != 3 || (gate_up && t.size(1) % 2 != 0)) {
      tensors.emplace(name, t);
      continue;
    }
    for (std::int64_t e = 0; e < t.size(0); ++e) {
      const int expert = static_cast<int>(e);
      if (gate_up) {
        const std::int64_t f = t.size(1) / 2;
        tensors[spec.expert_name(layer, expert, 0)] = t[e].narrow(0, 0, f).contiguous();
        tensors[spec.expert_name(layer, expert, 1)] = t[e].narrow(0, f, f).contiguous();
      } else {
        tensors[spec.expert_name(layer, expert, 2)] = t[e].contiguous();
      }
    }
    const auto router = tensors.find(layer + kMemoryRouter);
    if (gate_up && std::string_view(spec.router) != kMemoryRouter && router != tensors.end()) {
      tensors[layer + spec.router] = router->second;
      tensors.erase(router);
    }
  }
}

std::int64_t hf_layers_in(const std::map<std::string, at::Tensor>& tensors, HfFamily family) {
  const std::string_view prefix = hf_family(family).layer_prefix;
  std::int64_t layers = 0;
  for (const auto& [name, t] : tensors) {
    if (!name.starts_with(prefix)) continue;
    std::int64_t index = 0;
    std::size_t i = prefix.size();
    for (; i < name.size() && name[i] >= '0' && name[i] <= '9' && index < (std::int64_t{1} << 40); ++i) {
      index = index * 10 + (name[i] - '0');
    }
    if (i > prefix.size() && i < name.size() && name[i] == '.') layers = std::max(layers, index + 1);
  }
  return layers;
}

void check_hf_tensors(const std::map<std::string, at::Tensor>& tensors, const HfTensorMap& map, const std::string& where) {
  const auto text = [](at::IntArrayRef shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i > 0 ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  };
  std::vector<std::string> problems;
  for (const HfTensorRule& rule : map) {
    for (std::size_t i = 0; i < rule.hf.size(); ++i) {
      const std::string& name = rule.hf[i];
      const HfShape& shape = rule.shapes[i];
      const auto it = tensors.find(name);
      if (it == tensors.end()) {
        problems.push_back(name + " is missing; config.json needs it with shape " + text(shape));
      } else if (it->second.sizes() != at::IntArrayRef(shape)) {
        problems.push_back(name + " has shape " + text(it->second.sizes()) + "; config.json needs " + text(shape));
      }
    }
  }
  // A wrong size repeats in every layer: the first few name it.
  constexpr std::size_t kShown = 8;
  if (problems.size() > kShown) {
    const std::size_t more = problems.size() - kShown;
    problems.resize(kShown);
    problems.push_back("... and " + std::to_string(more) + " more tensors");
  }
  throw_if_problems(where + ": the tensors do not match config.json", problems, ProblemHeading::kList);
}

}  // namespace megatron::interop::detail
