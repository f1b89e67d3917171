// HuggingFace's tensor layouts against Megatron's (see hf_layout.h).
#include "hf_layout.h"

#include <nlohmann/json.hpp>
#include <set>
#include <vector>

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

std::map<std::string, at::Tensor> read_hf_tensors(const std::filesystem::path& dir) {
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
  std::map<std::string, at::Tensor> out;
  for (const auto& file : files) {
    for (auto& [name, t] : checkpoint::read_safetensors((dir / file).string()).tensors) {
      out[name] = t.to(at::kFloat).contiguous();
    }
  }
  return out;
}

}  // namespace megatron::interop::detail
