// The run's datasets from its data plan (see trainer_parts.h): the tokenizer's identity for the
// cache names, stale cache temporaries removed, Megatron's log lines; and the FLOPs of an iteration.
#include <cstdlib>
#include <map>
#include <ostream>
#include <set>
#include <string_view>

#include "megatron/core/check.h"
#include "megatron/core/log.h"
#include "megatron/core/process_lock.h"
#include "megatron/core/strings.h"
#include "megatron/train/training_log.h"
#include "trainer_parts.h"

namespace megatron::train {

namespace {

// The tokenizer's Megatron identity (TokenizerOptions::identity) as the dataset caches spell it.
data::PyJson tokenizer_identifiers(const tokenizer::TokenizerOptions& o) {
  const tokenizer::TokenizerIdentity identity = o.identity();
  auto id = data::PyJson::dict();
  id.set("class", identity.class_name);
  data::PyJson::List paths;
  for (const std::string& path : identity.paths) paths.emplace_back(path);
  id.set("tokenizer_path", data::PyJson(std::move(paths)));
  for (const auto& [name, value] : identity.arguments) id.set(name, value);
  return id;
}

data::TokenizerInfo tokenizer_info(const tokenizer::TokenizerOptions& options, const tokenizer::Tokenizer& tok) {
  data::TokenizerInfo info;
  info.vocab_size = tok.vocab_size();
  info.eod = tok.eod();
  if (const auto pad = tok.pad()) info.pad = *pad;
  info.identifiers = tokenizer_identifiers(options);
  return info;
}

}  // namespace

namespace {

// Removes the index-cache temporaries that dead runs left (in --data-cache-path, else in each
// dataset's <prefix>/cache/GPTDataset_indices; the numbers among the paths are weights).
// Returns the line to log, or "".
std::string remove_stale_cache_temporaries(const data::DataPaths& paths, const data::GptDatasetConfig& config) {
  std::set<std::string> folders;
  for (const auto* list : {&paths.data_path, &paths.train_data_path, &paths.valid_data_path, &paths.test_data_path}) {
    for (const std::string& entry : *list) {
      char* end = nullptr;
      std::strtod(entry.c_str(), &end);
      if (end != entry.c_str() && *end == '\0') continue;
      const std::string folder = data::gpt_cache_folder(config, entry);
      if (!folder.empty()) folders.insert(folder);
    }
  }
  if (!config.data_cache_path.empty()) folders.insert(config.data_cache_path);
  const auto is_cache_file = [](std::string_view base) {
    return base.ends_with(".npy") || base.ends_with(".json") || base.ends_with("-description.txt");
  };
  std::vector<std::string> removed;
  for (const std::string& folder : folders) {
    for (auto& path : remove_stale_temporaries(folder, is_cache_file)) removed.push_back(std::move(path));
  }
  const std::string line = describe_removed_temporaries(removed);
  return line.empty() ? line : line + "\n";
}

}  // namespace

data::GptDatasets build_run_datasets(const DataPlan& d, const tokenizer::TokenizerOptions& tokenizer_options,
                                     const tokenizer::Tokenizer& tok, bool remove_stale, std::ostream& out) {
  const data::DataPaths& paths = d.paths;
  const data::SplitSamples samples = data::train_valid_test_num_samples(d.counts);
  out << "> building train, validation, and test datasets ...\n" << data::format_target_sizes(samples);
  out << "> building train, validation, and test datasets for GPT ..." << std::endl;
  data::GptDatasetConfig config = d.dataset;
  config.tokenizer = tokenizer_info(tokenizer_options, tok);
  const auto log = std::make_shared<Log>(out);
  config.info = [log](const std::string& line) { log->record(kLogInfo, "megatron.core.datasets", line); };
  config.warning = [log](const std::string& line) { log->record(kLogWarning, "megatron.core.datasets", line); };
  if (remove_stale) out << remove_stale_cache_temporaries(paths, config);
  auto datasets = data::build_gpt_datasets(paths, samples, config);
  out << "> finished creating GPT datasets ..." << std::endl;
  return datasets;
}

double flops_per_iteration(const RunPlan& plan) {
  const model::ModelConfig& m = plan.model;
  return flops_per_batch({m.num_layers, m.hidden_size, m.ffn_hidden_size, m.num_attention_heads, m.num_query_groups,
                          m.kv_channels, m.padded_vocab_size, m.seq_length, m.swiglu, m.moe.num_moe_layers(m.num_layers),
                          m.moe.router_topk, m.moe.expert_ffn_hidden_size(m.ffn_hidden_size),
                          m.moe.shared_expert_intermediate_size},
                         plan.loop.global_batch_size);
}

}  // namespace megatron::train
