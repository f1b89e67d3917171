// The train / valid / test datasets from the data flags (see dataset_builder.h), case for case
// as blended_megatron_dataset_builder.py.
#include "megatron/data/dataset_builder.h"

#include <cmath>
#include <map>

#include "megatron/core/check.h"

namespace megatron::data {
namespace {

using DatasetPtr = std::shared_ptr<const GptDataset>;

class Builder {
 public:
  explicit Builder(const GptDatasetConfig& config) : config_(config) {}

  // Opens `prefix` once and checks its token ids against the vocabulary.
  std::shared_ptr<const TokenSource> source(const std::string& prefix) {
    auto found = sources_.find(prefix);
    if (found != sources_.end()) return found->second;
    auto opened =
        std::make_shared<const IndexedTokenSource>(prefix, gpt_cache_folder(config_, prefix));
    if (config_.tokenizer.vocab_size > 0) {
      check_token_ids_fit_vocab(*opened, config_.tokenizer.vocab_size);
    }
    sources_.emplace(prefix, opened);
    return opened;
  }

  // One GptDataset per non-empty split of a single low-level dataset.
  std::array<DatasetPtr, 3> splits(const std::shared_ptr<const TokenSource>& source,
                                   const std::optional<std::string>& prefix,
                                   const SplitMatrix& matrix, const SplitSamples& samples) {
    std::array<DatasetPtr, 3> out;
    for (Split split : kAllSplits) {
      const auto s = static_cast<std::size_t>(split);
      if (!matrix[s].has_value()) continue;
      const IndexRange range = split_index_range(*matrix[s], source->num_sequences());
      out[s] =
          std::make_shared<const GptDataset>(source, prefix, range, samples[s], split, config_);
    }
    return out;
  }

  // A blend of several prefixes over the non-empty splits of `matrix`.
  std::array<std::shared_ptr<const SampleDataset>, 3> blend(const Blend& blend,
                                                            const SplitMatrix& matrix,
                                                            const SplitSamples& samples,
                                                            const std::string& flag) {
    std::optional<std::vector<double>> weights;
    if (blend.weights.has_value()) weights = normalize_weights(*blend.weights);
    const std::size_t n = blend.prefixes.size();
    // Megatron's _get_size_per_split_per_dataset: targets and surplus-padded buffers.
    std::vector<SplitSamples> targets(n), buffers(n);
    if (weights.has_value()) {
      for (std::size_t d = 0; d < n; ++d) {
        for (std::size_t s = 0; s < 3; ++s) {
          if (!matrix[s].has_value()) continue;
          MEGATRON_CHECK(samples[s].has_value(), flag, " gives weights, so the ",
                         split_name(static_cast<Split>(s)),
                         " split needs a sample count; drop the weights to use each dataset once");
          const auto target = static_cast<std::int64_t>(
              std::ceil(static_cast<double>(*samples[s]) * (*weights)[d]));
          targets[d][s] = target;
          buffers[d][s] = static_cast<std::int64_t>(
              std::ceil(static_cast<double>(target) * (1.0 + config_.mid_level_dataset_surplus)));
        }
      }
    }
    std::array<std::vector<DatasetPtr>, 3> per_split;
    for (std::size_t d = 0; d < n; ++d) {
      const std::array<DatasetPtr, 3> built =
          splits(source(blend.prefixes[d]), blend.prefixes[d], matrix, buffers[d]);
      for (std::size_t s = 0; s < 3; ++s) {
        if (built[s]) per_split[s].push_back(built[s]);
      }
    }
    std::array<std::shared_ptr<const SampleDataset>, 3> out;
    for (std::size_t s = 0; s < 3; ++s) {
      if (!matrix[s].has_value()) continue;
      if (weights.has_value()) {
        std::uint64_t size = 0;
        for (std::size_t d = 0; d < n; ++d) size += static_cast<std::uint64_t>(*targets[d][s]);
        out[s] = std::make_shared<const BlendedDataset>(per_split[s], *weights, size, config_);
        continue;
      }
      std::vector<double> lengths;
      std::uint64_t total = 0;
      for (const DatasetPtr& dataset : per_split[s]) {
        MEGATRON_CHECK(dataset->size() > 0, flag, ": the ", split_name(static_cast<Split>(s)),
                       " split of ", dataset->source().prefix(),
                       " holds no samples, so it cannot weigh in a blend; remove it");
        lengths.push_back(static_cast<double>(dataset->size()));
        total += dataset->size();
      }
      std::optional<std::uint64_t> size;
      if (samples[s].has_value()) {
        size = std::min<std::uint64_t>(static_cast<std::uint64_t>(*samples[s]), total);
      }
      out[s] = std::make_shared<const BlendedDataset>(per_split[s], lengths, size, config_);
    }
    return out;
  }

 private:
  const GptDatasetConfig& config_;
  std::map<std::string, std::shared_ptr<const TokenSource>> sources_;
};

std::array<std::shared_ptr<const SampleDataset>, 3> widen(const std::array<DatasetPtr, 3>& in) {
  return {in[0], in[1], in[2]};
}

}  // namespace

GptDatasets build_gpt_datasets(const DataPaths& paths, const SplitSamples& samples,
                               GptDatasetConfig config) {
  const std::array<const std::vector<std::string>*, 3> per_split_paths = {
      &paths.train_data_path, &paths.valid_data_path, &paths.test_data_path};
  const bool per_split = !paths.train_data_path.empty() || !paths.valid_data_path.empty() ||
                         !paths.test_data_path.empty();
  MEGATRON_CHECK(!(per_split && !paths.data_path.empty()),
                 "--data-path cannot be combined with --train-data-path / --valid-data-path / "
                 "--test-data-path; use one or the other");
  MEGATRON_CHECK(!(paths.mock_data && (per_split || !paths.data_path.empty())),
                 "--mock-data cannot be combined with a data path; drop one of them");
  GptDatasets result;

  if (paths.mock_data || (paths.data_path.empty() && !per_split)) {
    config.mock = true;
    config.split = kMockSplit;
    config.split_matrix = parse_split(kMockSplit);
    auto source =
        std::make_shared<const MockTokenSource>(config.tokenizer.eod, config.tokenizer.vocab_size);
    if (config.tokenizer.vocab_size > 0) {
      check_token_ids_fit_vocab(*source, config.tokenizer.vocab_size);
    }
    Builder builder(config);
    result.splits = widen(builder.splits(source, std::nullopt, *config.split_matrix, samples));
    result.split = config.split;
    return result;
  }

  if (!per_split) {
    if (!paths.split.has_value()) {
      log_warning(config.warning, std::string("--split not given; using Megatron's default \"") +
                                      kDefaultSplit + "\"");
    }
    config.split = paths.split.value_or(kDefaultSplit);
    config.split_matrix = parse_split(*config.split);
    const Blend blend = parse_blend(paths.data_path, "--data-path");
    Builder builder(config);
    if (blend.prefixes.size() == 1 && !blend.weights.has_value()) {
      const std::string& prefix = blend.prefixes[0];
      result.splits =
          widen(builder.splits(builder.source(prefix), prefix, *config.split_matrix, samples));
    } else {
      result.splits = builder.blend(blend, *config.split_matrix, samples, "--data-path");
    }
    result.split = config.split;
    return result;
  }

  MEGATRON_CHECK(!paths.split.has_value(), "--split \"", *paths.split,
                 "\" cannot be combined with --train-data-path / --valid-data-path / "
                 "--test-data-path (each of those is used whole); drop --split");
  config.split.reset();
  config.split_matrix.reset();
  Builder builder(config);
  for (Split split : kAllSplits) {
    const auto s = static_cast<std::size_t>(split);
    if (per_split_paths[s]->empty()) continue;
    const std::string flag = std::string("--") + split_name(split) + "-data-path";
    const Blend blend = parse_blend(*per_split_paths[s], flag);
    SplitMatrix whole;
    whole[s] = SplitRange{0.0, 1.0, false};
    SplitSamples spoof = {0, 0, 0};
    spoof[s] = samples[s];
    if (blend.prefixes.size() == 1) {
      const std::string& prefix = blend.prefixes[0];
      result.splits[s] = builder.splits(builder.source(prefix), prefix, whole, spoof)[s];
    } else {
      result.splits[s] = builder.blend(blend, whole, spoof, flag)[s];
    }
  }
  return result;
}

}  // namespace megatron::data
