// Command line -> module configurations, datasets, micro-batch tensors and checkpoint mapping
// (see trainer_parts.h).
#include <cstdlib>
#include <map>
#include <ostream>
#include <set>
#include <string_view>

#include "megatron/core/check.h"
#include "megatron/core/process_lock.h"
#include "megatron/tokenizer/gpt2_bpe_tokenizer.h"
#include "trainer_parts.h"

namespace megatron::train {

model::ModelConfig to_model_config(const Arguments& args, std::int64_t padded_vocab) {
  const ModelArgs& m = args.model;
  model::ModelConfig c;
  c.num_layers = m.num_layers;
  c.hidden_size = m.hidden_size;
  c.ffn_hidden_size = m.ffn_hidden_size;
  c.num_attention_heads = m.num_attention_heads;
  c.num_query_groups = m.group_query_attention ? m.num_query_groups : m.num_attention_heads;
  c.kv_channels = m.kv_channels;
  c.seq_length = m.seq_length;
  c.max_position_embeddings = m.max_position_embeddings;
  c.position_embedding = m.position_embedding_type == PositionEmbeddingType::kRope
                             ? model::PositionEmbedding::kRope
                             : model::PositionEmbedding::kLearnedAbsolute;
  c.rotary_base = static_cast<double>(m.rotary_base);
  c.rotary_percent = m.rotary_percent;
  c.normalization = m.normalization == Normalization::kRmsNorm ? model::Normalization::kRmsNorm
                                                                : model::Normalization::kLayerNorm;
  c.norm_epsilon = m.norm_epsilon;
  c.swiglu = m.swiglu;
  c.untie_embeddings_and_output_weights = m.untie_embeddings_and_output_weights;
  c.add_bias_linear = m.add_bias_linear;
  c.init_method_std = m.init_method_std;
  c.attention_dropout = m.attention_dropout;
  c.hidden_dropout = m.hidden_dropout;
  c.padded_vocab_size = padded_vocab;
  c.sequence_parallel = args.parallel.sequence_parallel;
  c.bias_activation_fusion = m.swiglu ? m.bias_swiglu_fusion : m.bias_gelu_fusion;
  c.masked_softmax_fusion = m.masked_softmax_fusion;
  c.apply_rope_fusion = m.apply_rope_fusion;
  c.attention_backend = m.attention_backend == "flash"     ? model::AttentionBackend::kFlash
                        : m.attention_backend == "fused"   ? model::AttentionBackend::kFused
                        : m.attention_backend == "unfused" ? model::AttentionBackend::kUnfused
                        : m.attention_backend == "local"   ? model::AttentionBackend::kLocal
                                                           : model::AttentionBackend::kAuto;
  if (m.recompute_granularity == "selective") c.recompute_granularity = model::RecomputeGranularity::kSelective;
  if (m.recompute_granularity == "full") c.recompute_granularity = model::RecomputeGranularity::kFull;
  c.recompute_method = m.recompute_method == "block" ? model::RecomputeMethod::kBlock : model::RecomputeMethod::kUniform;
  c.recompute_num_layers = m.recompute_num_layers.value_or(1);
  return c;
}

optim::SchedulerConfig to_scheduler_config(const Arguments& args) {
  const SchedulerSteps s = scheduler_steps(args);
  optim::SchedulerConfig c;
  c.max_lr = s.max_lr;
  c.min_lr = s.min_lr;
  c.init_lr = s.init_lr;
  c.warmup_steps = s.warmup_steps;
  c.decay_steps = s.decay_steps;
  switch (s.decay_style) {
    case LrDecayStyle::kConstant: c.decay_style = optim::LrDecayStyle::kConstant; break;
    case LrDecayStyle::kLinear: c.decay_style = optim::LrDecayStyle::kLinear; break;
    case LrDecayStyle::kCosine: c.decay_style = optim::LrDecayStyle::kCosine; break;
    case LrDecayStyle::kInverseSquareRoot: c.decay_style = optim::LrDecayStyle::kInverseSquareRoot; break;
    case LrDecayStyle::kWsd: c.decay_style = optim::LrDecayStyle::kWsd; break;
  }
  c.wsd_decay_steps = s.wsd_decay_steps.value_or(0);
  switch (s.wsd_decay_style) {
    case WsdDecayStyle::kExponential: c.wsd_decay_style = optim::WsdDecayStyle::kExponential; break;
    case WsdDecayStyle::kLinear: c.wsd_decay_style = optim::WsdDecayStyle::kLinear; break;
    case WsdDecayStyle::kCosine: c.wsd_decay_style = optim::WsdDecayStyle::kCosine; break;
    case WsdDecayStyle::kMinusSqrt: c.wsd_decay_style = optim::WsdDecayStyle::kMinusSqrt; break;
  }
  c.start_wd = args.optimizer.start_weight_decay.value_or(args.optimizer.weight_decay);
  c.end_wd = args.optimizer.end_weight_decay.value_or(args.optimizer.weight_decay);
  c.wd_incr_steps = s.weight_decay_incr_steps;
  c.wd_incr_style = args.optimizer.weight_decay_incr_style == "linear"   ? optim::WdIncrStyle::kLinear
                    : args.optimizer.weight_decay_incr_style == "cosine" ? optim::WdIncrStyle::kCosine
                                                                         : optim::WdIncrStyle::kConstant;
  return c;
}

std::unique_ptr<tokenizer::Tokenizer> build_run_tokenizer(const Arguments& args) {
  tokenizer::TokenizerOptions o;
  o.type = args.tokenizer.tokenizer_type.value_or("GPT2BPETokenizer");
  o.vocab_file = args.tokenizer.vocab_file.value_or("");
  o.merge_file = args.tokenizer.merge_file.value_or("");
  o.vocab_size = args.tokenizer.vocab_size.value_or(0);
  return tokenizer::build_tokenizer(o);
}

namespace {

data::TokenizerInfo tokenizer_info(const Arguments& args, const tokenizer::Tokenizer& tok) {
  data::TokenizerInfo info;
  info.vocab_size = tok.vocab_size();
  info.eod = tok.eod();
  // Megatron's legacy unique_identifiers: the class name, the files, then the options.
  info.identifiers.set("class", tok.type() == "NullTokenizer" ? "_NullTokenizer" : "_GPT2BPETokenizer");
  data::PyJson paths(data::PyJson::List{});
  if (tok.type() != "NullTokenizer") {
    paths.push_back(args.tokenizer.vocab_file.value_or(""));
    paths.push_back(args.tokenizer.merge_file.value_or(""));
  }
  info.identifiers.set("tokenizer_path", paths);
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

data::GptDatasets build_run_datasets(const Arguments& args, const tokenizer::Tokenizer& tok, std::ostream& out) {
  data::DataPaths paths;
  const DataArgs& d = args.data;
  paths.data_path = d.data_path.value_or(std::vector<std::string>{});
  paths.train_data_path = d.train_data_path.value_or(std::vector<std::string>{});
  paths.valid_data_path = d.valid_data_path.value_or(std::vector<std::string>{});
  paths.test_data_path = d.test_data_path.value_or(std::vector<std::string>{});
  paths.mock_data = d.mock_data;
  paths.split = d.split;
  data::SampleCountArgs counts;
  counts.train_samples = args.training.train_samples;
  counts.train_iters = total_train_iters(args);
  counts.global_batch_size = args.training.global_batch_size;
  counts.eval_interval = args.logging.eval_interval;
  counts.eval_iters = args.logging.eval_iters;
  const data::SplitSamples samples = data::train_valid_test_num_samples(counts);
  out << "> building train, validation, and test datasets ...\n" << data::format_target_sizes(samples);
  out << "> building train, validation, and test datasets for GPT ..." << std::endl;
  data::GptDatasetConfig config;
  config.random_seed = static_cast<std::uint32_t>(args.training.seed);
  config.sequence_length = args.model.seq_length;
  config.tokenizer = tokenizer_info(args, tok);
  config.data_cache_path = d.data_cache_path.value_or("");
  config.reset_position_ids = d.reset_position_ids;
  config.reset_attention_mask = d.reset_attention_mask;
  config.eod_mask_loss = d.eod_mask_loss;
  config.mid_level_dataset_surplus = d.mid_level_dataset_surplus;
  config.info = [&out](const std::string& line) { out << "INFO:megatron.core.datasets:" << line << "\n"; };
  config.warning = [&out](const std::string& line) { out << "WARNING:megatron.core.datasets:" << line << "\n"; };
  if (args.parallel.rank == 0) out << remove_stale_cache_temporaries(paths, config);
  auto datasets = data::build_gpt_datasets(paths, samples, config);
  out << "> finished creating GPT datasets ..." << std::endl;
  return datasets;
}

}  // namespace megatron::train
