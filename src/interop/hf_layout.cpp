// HuggingFace's tensor layouts against Megatron's (see hf_layout.h).
#include "hf_layout.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
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
  std::map<std::string, at::Tensor> out;
  for (const auto& file : files) {
    for (auto& [name, t] : checkpoint::read_safetensors((dir / file).string()).tensors) {
      const bool bare = family == HfFamily::kGpt2 && !name.starts_with("transformer.") && !name.starts_with("lm_head.");
      out[bare ? "transformer." + name : name] = t.to(at::kFloat).contiguous();
    }
  }
  return out;
}

bool hf_has_experts(HfFamily family) { return family == HfFamily::kMixtral || family == HfFamily::kQwen3Moe; }
bool hf_has_qk_norms(HfFamily family) { return family == HfFamily::kQwen3 || family == HfFamily::kQwen3Moe; }

std::string hf_router_name(HfFamily family, const std::string& layer) {
  return layer + (family == HfFamily::kMixtral ? "block_sparse_moe.gate.weight" : "mlp.gate.weight");
}

HfExpertNames hf_expert_names(HfFamily family, const std::string& layer, int expert) {
  if (family == HfFamily::kMixtral) {
    const std::string x = layer + "block_sparse_moe.experts." + std::to_string(expert) + ".";
    return {x + "w1.weight", x + "w3.weight", x + "w2.weight"};
  }
  const std::string x = layer + "mlp.experts." + std::to_string(expert) + ".";
  return {x + "gate_proj.weight", x + "up_proj.weight", x + "down_proj.weight"};
}

void split_fused_experts(std::map<std::string, at::Tensor>& tensors, HfFamily family) {
  if (!hf_has_experts(family)) return;
  constexpr std::string_view kGateUp = "mlp.experts.gate_up_proj", kDown = "mlp.experts.down_proj";
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
      const HfExpertNames x = hf_expert_names(family, layer, static_cast<int>(e));
      if (gate_up) {
        const std::int64_t f = t.size(1) / 2;
        tensors[x.gate] = t[e].narrow(0, 0, f).contiguous();
        tensors[x.up] = t[e].narrow(0, f, f).contiguous();
      } else {
        tensors[x.down] = t[e].contiguous();
      }
    }
    // transformers 5 keeps Mixtral's router under mlp.gate in memory.
    const auto router = tensors.find(layer + "mlp.gate.weight");
    if (gate_up && family == HfFamily::kMixtral && router != tensors.end()) {
      tensors[hf_router_name(family, layer)] = router->second;
      tensors.erase(router);
    }
  }
}

HfShapes hf_tensor_shapes(HfFamily family, const model::ModelConfig& c, std::int64_t vocab, bool lm_head) {
  // In 64 bits: the sizes come from config.json and their products may pass 2^31.
  const std::int64_t h = c.hidden_size, ffn = c.ffn_hidden_size, hn = c.kv_channels;
  const std::int64_t q = c.num_attention_heads * hn, kv = c.num_query_groups * hn;
  HfShapes s;
  auto add = [&](const std::string& name, std::vector<std::int64_t> shape) { s.emplace_back(name, std::move(shape)); };
  if (family == HfFamily::kGpt2) {
    add("transformer.wte.weight", {vocab, h});
    add("transformer.wpe.weight", {c.max_position_embeddings, h});
    for (int i = 0; i < c.num_layers; ++i) {
      const std::string p = "transformer.h." + std::to_string(i) + ".";
      for (const char* norm : {"ln_1", "ln_2"}) {
        add(p + norm + ".weight", {h});
        add(p + norm + ".bias", {h});
      }
      add(p + "attn.c_attn.weight", {h, 3 * h});
      add(p + "attn.c_attn.bias", {3 * h});
      add(p + "attn.c_proj.weight", {h, h});
      add(p + "attn.c_proj.bias", {h});
      add(p + "mlp.c_fc.weight", {h, ffn});
      add(p + "mlp.c_fc.bias", {ffn});
      add(p + "mlp.c_proj.weight", {ffn, h});
      add(p + "mlp.c_proj.bias", {h});
    }
    add("transformer.ln_f.weight", {h});
    add("transformer.ln_f.bias", {h});
  } else {
    add("model.embed_tokens.weight", {vocab, h});
    for (int i = 0; i < c.num_layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      add(p + "input_layernorm.weight", {h});
      add(p + "self_attn.q_proj.weight", {q, h});
      add(p + "self_attn.k_proj.weight", {kv, h});
      add(p + "self_attn.v_proj.weight", {kv, h});
      add(p + "self_attn.o_proj.weight", {h, q});
      if (c.add_bias_linear) {
        add(p + "self_attn.q_proj.bias", {q});
        add(p + "self_attn.k_proj.bias", {kv});
        add(p + "self_attn.v_proj.bias", {kv});
        add(p + "self_attn.o_proj.bias", {h});
      }
      if (hf_has_qk_norms(family)) {
        add(p + "self_attn.q_norm.weight", {hn});
        add(p + "self_attn.k_norm.weight", {hn});
      }
      add(p + "post_attention_layernorm.weight", {h});
      if (hf_has_experts(family) && c.moe.is_moe_layer(i)) {
        const std::int64_t f = c.moe.expert_ffn_hidden_size(c.ffn_hidden_size);
        add(hf_router_name(family, p), {c.moe.num_experts, h});
        for (int e = 0; e < c.moe.num_experts; ++e) {
          const HfExpertNames x = hf_expert_names(family, p, e);
          add(x.gate, {f, h});
          add(x.up, {f, h});
          add(x.down, {h, f});
        }
        continue;
      }
      add(p + "mlp.gate_proj.weight", {ffn, h});
      add(p + "mlp.up_proj.weight", {ffn, h});
      add(p + "mlp.down_proj.weight", {h, ffn});
      if (c.add_bias_linear) {
        add(p + "mlp.gate_proj.bias", {ffn});
        add(p + "mlp.up_proj.bias", {ffn});
        add(p + "mlp.down_proj.bias", {h});
      }
    }
    add("model.norm.weight", {h});
  }
  if (lm_head) add("lm_head.weight", {vocab, h});
  return s;
}

std::int64_t hf_layers_in(const std::map<std::string, at::Tensor>& tensors, HfFamily family) {
  const std::string_view prefix = family == HfFamily::kGpt2 ? "transformer.h." : "model.layers.";
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

void check_hf_tensors(const std::map<std::string, at::Tensor>& tensors, const HfShapes& expected,
                      const std::string& where) {
  const auto text = [](at::IntArrayRef shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i > 0 ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  };
  std::vector<std::string> problems;
  for (const auto& [name, shape] : expected) {
    const auto it = tensors.find(name);
    if (it == tensors.end()) {
      problems.push_back(name + " is missing; config.json needs it with shape " + text(shape));
    } else if (it->second.sizes() != at::IntArrayRef(shape)) {
      problems.push_back(name + " has shape " + text(it->second.sizes()) + "; config.json needs " + text(shape));
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
