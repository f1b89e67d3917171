// Megatron's parameters as a HuggingFace model folder (see huggingface.h).
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "hf_family.h"
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

const char* dtype_name(at::ScalarType dtype) {
  return dtype == at::kBFloat16 ? "bfloat16" : dtype == at::kHalf ? "float16" : "float32";
}

}  // namespace

HfExport to_hf(const model::ModelConfig& c, const Named& params, std::int64_t eod, std::int64_t vocab_size,
               at::ScalarType dtype, std::optional<std::int64_t> bos_id) {
  const std::int64_t bos = bos_id.value_or(eod);
  HfExport out;
  out.family = hf_family_of(c);
  const detail::HfFamilySpec& spec = detail::hf_family(out.family);
  MEGATRON_CHECK(vocab_size > 0 && vocab_size <= c.padded_vocab_size, "the tokenizer has ", vocab_size,
                 " tokens but the model's vocabulary has ", c.padded_vocab_size,
                 " rows: this checkpoint was trained with another tokenizer (--vocab-file)");
  std::map<std::string, at::Tensor> p;
  for (const auto& [name, t] : params) p.emplace(name, t.detach());
  for (const detail::HfTensorRule& rule : spec.tensor_map(spec, c, vocab_size)) {
    const auto it = p.find(rule.megatron);
    MEGATRON_CHECK(it != p.end() || rule.zeros_when_absent, "the model has no parameter ", rule.megatron);
    const at::Tensor megatron = it != p.end() ? it->second : at::zeros(rule.shapes[0]);
    const std::vector<at::Tensor> hf = detail::to_hf_tensors(rule, megatron, c);
    for (std::size_t i = 0; i < hf.size(); ++i) out.tensors.emplace_back(rule.hf[i], hf[i].to(dtype).contiguous());
  }
  out.config = spec.write_config(spec, c, vocab_size);
  // A tokenizer without an end of document (-1) writes transformers' None.
  const auto id_or_null = [](std::int64_t id) { return id >= 0 ? nlohmann::ordered_json(id) : nlohmann::ordered_json(nullptr); };
  out.config["use_cache"] = true;
  out.config["bos_token_id"] = id_or_null(bos);
  out.config["eos_token_id"] = id_or_null(eod);
  out.config["tie_word_embeddings"] = !c.untie_embeddings_and_output_weights;
  out.config["dtype"] = dtype_name(dtype);
  out.generation_config = {{"bos_token_id", id_or_null(bos)}, {"eos_token_id", id_or_null(eod)}, {"pad_token_id", id_or_null(eod)},
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
