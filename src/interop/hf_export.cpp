// Megatron's parameters as a HuggingFace model folder (see huggingface.h).
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "hf_layout.h"
#include "megatron/checkpoint/safetensors.h"
#include "megatron/core/check.h"
#include "megatron/core/file_io.h"
#include "megatron/core/process_lock.h"
#include "megatron/interop/huggingface.h"
#include "megatron/tokenizer/hf_tokenizer_export.h"

namespace megatron::interop {
namespace {

namespace fs = std::filesystem;
using Named = std::vector<std::pair<std::string, at::Tensor>>;
using detail::Qkv;
using detail::split_qkv;

const at::Tensor& get(const std::map<std::string, at::Tensor>& m, const std::string& name) {
  const auto it = m.find(name);
  MEGATRON_CHECK(it != m.end(), "the model has no parameter ", name);
  return it->second;
}

// config.json of the Llama-style families, without the token ids, tie and dtype.
nlohmann::ordered_json llama_style_config(const model::ModelConfig& c, HfFamily family, std::int64_t vocab_size) {
  nlohmann::ordered_json j = {{"architectures", {hf_architecture(family)}},
                              {"model_type", hf_model_type(family)},
                              {"vocab_size", vocab_size},
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
  const model::MoeConfig& m = c.moe;
  switch (family) {
    case HfFamily::kLlama: j["mlp_bias"] = c.add_bias_linear; break;
    case HfFamily::kMixtral:
      j.erase("attention_bias");
      j["intermediate_size"] = m.expert_ffn_hidden_size(c.ffn_hidden_size);
      j["num_local_experts"] = m.num_experts;
      j["num_experts_per_tok"] = m.router_topk;
      j["router_aux_loss_coef"] = m.aux_loss_coeff;
      j["output_router_logits"] = false;
      j["router_jitter_noise"] = 0.0;
      j["sliding_window"] = nullptr;
      break;
    case HfFamily::kQwen3:
    case HfFamily::kQwen3Moe:
      j["use_sliding_window"] = false;
      j["sliding_window"] = nullptr;
      j["max_window_layers"] = c.num_layers;
      if (family == HfFamily::kQwen3) break;
      // Dense layers by their index (decoder_sparse_step 1 puts experts everywhere else).
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
      break;
    case HfFamily::kGpt2: break;
  }
  return j;
}

}  // namespace

HfExport to_hf(const model::ModelConfig& c, const Named& params, std::int64_t eod, std::int64_t vocab_size,
               at::ScalarType dtype, std::optional<std::int64_t> bos_id) {
  const std::int64_t bos = bos_id.value_or(eod);
  HfExport out;
  out.family = hf_family_of(c);
  MEGATRON_CHECK(vocab_size > 0 && vocab_size <= c.padded_vocab_size, "the tokenizer has ", vocab_size,
                 " tokens but the model's vocabulary has ", c.padded_vocab_size,
                 " rows: this checkpoint was trained with another tokenizer (--vocab-file)");
  std::map<std::string, at::Tensor> p;
  for (const auto& [name, t] : params) p.emplace(name, t.detach());
  const bool tied = !c.untie_embeddings_and_output_weights;
  auto put = [&](const std::string& name, const at::Tensor& t) {
    out.tensors.emplace_back(name, t.to(dtype).contiguous());
  };
  auto layer = [](int i, const char* rest) { return "decoder.layers." + std::to_string(i) + "." + rest; };
  auto vocab_rows = [&](const char* name) { return get(p, name).narrow(0, 0, vocab_size); };
  const std::string dtype_name = dtype == at::kBFloat16 ? "bfloat16" : dtype == at::kHalf ? "float16" : "float32";
  if (out.family == HfFamily::kGpt2) {
    put("transformer.wte.weight", vocab_rows("embedding.word_embeddings.weight"));
    put("transformer.wpe.weight", get(p, "embedding.position_embeddings.weight"));
    for (int i = 0; i < c.num_layers; ++i) {
      const std::string h = "transformer.h." + std::to_string(i) + ".";
      auto bias_or_zeros = [&](const std::string& name, std::int64_t n) {
        const auto it = p.find(name);
        return it != p.end() ? it->second : at::zeros({n});  // GPT-2 always has biases: zero is exact
      };
      put(h + "ln_1.weight", get(p, layer(i, "input_layernorm.weight")));
      put(h + "ln_1.bias", get(p, layer(i, "input_layernorm.bias")));
      const Qkv w = split_qkv(get(p, layer(i, "self_attention.linear_qkv.weight")), c);
      put(h + "attn.c_attn.weight", at::cat({w.q, w.k, w.v}, 0).t());  // Conv1D: [in, out]
      const Qkv b = split_qkv(bias_or_zeros(layer(i, "self_attention.linear_qkv.bias"), c.qkv_size()), c);
      put(h + "attn.c_attn.bias", at::cat({b.q, b.k, b.v}, 0));
      put(h + "attn.c_proj.weight", get(p, layer(i, "self_attention.linear_proj.weight")).t());
      put(h + "attn.c_proj.bias", bias_or_zeros(layer(i, "self_attention.linear_proj.bias"), c.hidden_size));
      put(h + "ln_2.weight", get(p, layer(i, "pre_mlp_layernorm.weight")));
      put(h + "ln_2.bias", get(p, layer(i, "pre_mlp_layernorm.bias")));
      put(h + "mlp.c_fc.weight", get(p, layer(i, "mlp.linear_fc1.weight")).t());
      put(h + "mlp.c_fc.bias", bias_or_zeros(layer(i, "mlp.linear_fc1.bias"), c.ffn_hidden_size));
      put(h + "mlp.c_proj.weight", get(p, layer(i, "mlp.linear_fc2.weight")).t());
      put(h + "mlp.c_proj.bias", bias_or_zeros(layer(i, "mlp.linear_fc2.bias"), c.hidden_size));
    }
    put("transformer.ln_f.weight", get(p, "decoder.final_layernorm.weight"));
    put("transformer.ln_f.bias", get(p, "decoder.final_layernorm.bias"));
    if (!tied) put("lm_head.weight", vocab_rows("output_layer.weight"));
    out.config = {{"architectures", {"GPT2LMHeadModel"}},
                  {"model_type", "gpt2"},
                  {"vocab_size", vocab_size},
                  {"n_positions", c.max_position_embeddings},
                  {"n_ctx", c.max_position_embeddings},
                  {"n_embd", c.hidden_size},
                  {"n_layer", c.num_layers},
                  {"n_head", c.num_attention_heads},
                  {"n_inner", c.ffn_hidden_size},
                  // Megatron's fused bias-GeLU is the tanh approximation (HF's gelu_new); unfused is erf.
                  {"activation_function", c.bias_activation_fusion ? "gelu_new" : "gelu"},
                  {"resid_pdrop", c.hidden_dropout},
                  {"embd_pdrop", c.hidden_dropout},
                  {"attn_pdrop", c.attention_dropout},
                  {"layer_norm_epsilon", c.norm_epsilon},
                  {"initializer_range", c.init_method_std},
                  {"scale_attn_weights", true},
                  {"use_cache", true},
                  {"bos_token_id", bos},
                  {"eos_token_id", eod},
                  {"tie_word_embeddings", tied},
                  {"dtype", dtype_name}};
  } else {
    put("model.embed_tokens.weight", vocab_rows("embedding.word_embeddings.weight"));
    for (int i = 0; i < c.num_layers; ++i) {
      const std::string h = "model.layers." + std::to_string(i) + ".";
      put(h + "input_layernorm.weight", get(p, layer(i, "input_layernorm.weight")));
      const Qkv w = split_qkv(get(p, layer(i, "self_attention.linear_qkv.weight")), c);
      put(h + "self_attn.q_proj.weight", w.q);
      put(h + "self_attn.k_proj.weight", w.k);
      put(h + "self_attn.v_proj.weight", w.v);
      put(h + "self_attn.o_proj.weight", get(p, layer(i, "self_attention.linear_proj.weight")));
      if (c.add_bias_linear) {
        const Qkv b = split_qkv(get(p, layer(i, "self_attention.linear_qkv.bias")), c);
        put(h + "self_attn.q_proj.bias", b.q);
        put(h + "self_attn.k_proj.bias", b.k);
        put(h + "self_attn.v_proj.bias", b.v);
        put(h + "self_attn.o_proj.bias", get(p, layer(i, "self_attention.linear_proj.bias")));
      }
      if (detail::hf_has_qk_norms(out.family)) {
        put(h + "self_attn.q_norm.weight", get(p, layer(i, "self_attention.q_layernorm.weight")));
        put(h + "self_attn.k_norm.weight", get(p, layer(i, "self_attention.k_layernorm.weight")));
      }
      if (detail::hf_has_experts(out.family) && c.moe.is_moe_layer(i)) {
        const std::int64_t ffn = c.moe.expert_ffn_hidden_size(c.ffn_hidden_size);
        const at::Tensor fc1 = get(p, layer(i, "mlp.experts.linear_fc1.weight"));  // [E, gate; up, h]
        const at::Tensor fc2 = get(p, layer(i, "mlp.experts.linear_fc2.weight"));  // [E, h, F]
        put(detail::hf_router_name(out.family, h), get(p, layer(i, "mlp.router.weight")));
        for (int e = 0; e < c.moe.num_experts; ++e) {
          const detail::HfExpertNames x = detail::hf_expert_names(out.family, h, e);
          put(x.gate, fc1[e].narrow(0, 0, ffn));
          put(x.up, fc1[e].narrow(0, ffn, ffn));
          put(x.down, fc2[e]);
        }
      } else {
        const at::Tensor fc1 = get(p, layer(i, "mlp.linear_fc1.weight"));  // [gate; up]
        put(h + "mlp.gate_proj.weight", fc1.narrow(0, 0, c.ffn_hidden_size));
        put(h + "mlp.up_proj.weight", fc1.narrow(0, c.ffn_hidden_size, c.ffn_hidden_size));
        put(h + "mlp.down_proj.weight", get(p, layer(i, "mlp.linear_fc2.weight")));
        if (c.add_bias_linear) {
          const at::Tensor fc1_bias = get(p, layer(i, "mlp.linear_fc1.bias"));
          put(h + "mlp.gate_proj.bias", fc1_bias.narrow(0, 0, c.ffn_hidden_size));
          put(h + "mlp.up_proj.bias", fc1_bias.narrow(0, c.ffn_hidden_size, c.ffn_hidden_size));
          put(h + "mlp.down_proj.bias", get(p, layer(i, "mlp.linear_fc2.bias")));
        }
      }
      put(h + "post_attention_layernorm.weight", get(p, layer(i, "pre_mlp_layernorm.weight")));
    }
    put("model.norm.weight", get(p, "decoder.final_layernorm.weight"));
    if (!tied) put("lm_head.weight", vocab_rows("output_layer.weight"));
    out.config = llama_style_config(c, out.family, vocab_size);
    out.config["use_cache"] = true;
    out.config["bos_token_id"] = bos;
    out.config["eos_token_id"] = eod;
    out.config["tie_word_embeddings"] = tied;
    out.config["dtype"] = dtype_name;
  }
  out.generation_config = {{"bos_token_id", bos}, {"eos_token_id", eod}, {"pad_token_id", eod},
                           {"max_length", c.seq_length}};
  return out;
}

void write_hf_folder(const std::string& dir, const HfExport& model, const tokenizer::TokenizerOptions& tokenizer,
                     std::int64_t model_max_length, std::uint64_t max_shard_bytes) {
  MEGATRON_CHECK(!fs::exists(dir), "--save-dir ", dir, " already exists; choose a new folder");
  // Read (and, for TikTokenizer, converted) before anything is written.
  const auto tokenizer_files = tokenizer::hf_tokenizer_files(tokenizer, model_max_length);
  const fs::path target(dir);
  if (target.has_parent_path()) fs::create_directories(target.parent_path());
  // An export killed before its rename left <dir>.tmp.<its pid>: gone with its process, it goes.
  const std::string folder_name = target.filename().string();
  remove_stale_temporaries(target.has_parent_path() ? target.parent_path().string() : ".",
                           [&](std::string_view base) { return base == folder_name; });
  TemporaryFolder temp(dir + ".tmp." + std::to_string(::getpid()));
  const fs::path tmp(temp.path());
  auto write_json = [&](const char* name, const nlohmann::ordered_json& j) {
    AtomicFile file((tmp / name).string());
    const std::string text = j.dump(2) + "\n";
    file.write(text.data(), text.size());
    file.commit();
  };
  // Shards in parameter order, each up to max_shard_bytes (a larger tensor gets one to itself).
  std::vector<checkpoint::NamedTensors> shards(1);
  std::uint64_t in_shard = 0, total = 0;
  for (const auto& [name, t] : model.tensors) {
    const std::uint64_t bytes = t.nbytes();
    if (in_shard > 0 && in_shard + bytes > max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().emplace_back(name, t);
    in_shard += bytes;
    total += bytes;
  }
  const std::map<std::string, std::string> metadata{{"format", "pt"}};
  if (shards.size() == 1) {
    checkpoint::write_safetensors((tmp / "model.safetensors").string(), shards[0], metadata);
  } else {
    nlohmann::ordered_json map = nlohmann::ordered_json::object();
    for (std::size_t i = 0; i < shards.size(); ++i) {
      char name[64];
      std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
      checkpoint::write_safetensors((tmp / name).string(), shards[i], metadata);
      for (const auto& [tensor, t] : shards[i]) map[tensor] = name;
    }
    write_json("model.safetensors.index.json", {{"metadata", {{"total_size", total}}}, {"weight_map", map}});
  }
  write_json("config.json", model.config);
  write_json("generation_config.json", model.generation_config);
  for (const auto& [name, contents] : tokenizer_files) {
    AtomicFile file((tmp / name).string());
    file.write(contents.data(), contents.size());
    file.commit();
  }
  fs::rename(tmp, target);
  temp.release();
  fsync_parent_folder(dir);
}

}  // namespace megatron::interop
