// The train / valid / test datasets from the data flags (see dataset_builder.h), case for case
// as blended_megatron_dataset_builder.py.
#include "megatron/data/dataset_builder.h"

#include <sys/resource.h>
#include <sys/statvfs.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include "megatron/core/check.h"
#include "megatron/core/strings.h"

namespace megatron::data {
namespace {

using DatasetPtr = std::shared_ptr<const GptDataset>;
using Sources = std::map<std::string, std::shared_ptr<const TokenSource>>;

// One split's indices as a dry run of the builder sees them.
struct PlannedIndices {
  std::string name;  // "dataset P" or "mock data"
  Split split;
  IndexFootprint footprint;
};

// The flags that set a split's sample count (spec 4.1).
const char* sample_flags(Split split) {
  switch (split) {
    case Split::kTrain:
      return "--train-iters / --train-samples";
    case Split::kValid:
      return "--eval-iters / --eval-interval";
    case Split::kTest:
      break;
  }
  return "--eval-iters";
}

std::string bytes_text(std::uint64_t bytes) {
  return str_cat(bytes, " bytes (", human_bytes(bytes), ")");
}

// MemAvailable, lowered by a cgroup v2 memory limit and RLIMIT_DATA / RLIMIT_AS when set.
std::uint64_t available_memory() {
  std::uint64_t available = std::numeric_limits<std::uint64_t>::max();
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") available = kib * 1024;
  }
  std::ifstream limit_file("/sys/fs/cgroup/memory.max");
  std::ifstream current_file("/sys/fs/cgroup/memory.current");
  std::string limit;
  std::uint64_t current = 0;
  if ((limit_file >> limit) && limit != "max" && (current_file >> current)) {
    const std::uint64_t cap = std::stoull(limit);
    available = std::min(available, cap > current ? cap - current : 0);
  }
  for (const int resource : {RLIMIT_DATA, RLIMIT_AS}) {
    struct rlimit rl {};
    if (::getrlimit(resource, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
      available = std::min<std::uint64_t>(available, rl.rlim_cur);
    }
  }
  return available;
}

// Free bytes for an unprivileged writer in `folder`, or in its nearest existing ancestor.
std::uint64_t free_disk(const std::string& folder) {
  std::error_code error;
  std::filesystem::path at = std::filesystem::absolute(folder, error);
  while (!at.empty() && !std::filesystem::exists(at, error) && at != at.parent_path()) {
    at = at.parent_path();
  }
  struct statvfs fs {};
  if (::statvfs(at.c_str(), &fs) != 0) return std::numeric_limits<std::uint64_t>::max();
  return static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
}

// Refuses, before anything is built or written, indices that cannot fit in memory or in their
// cache folder, naming the split that needs the most and the flags that set its size.
void check_index_budget(const std::vector<PlannedIndices>& plan) {
  std::uint64_t memory = 0;
  std::map<std::string, std::uint64_t> disk;
  const PlannedIndices* largest = nullptr;
  const auto add = [](std::uint64_t a, std::uint64_t b) {
    return b > std::numeric_limits<std::uint64_t>::max() - a
               ? std::numeric_limits<std::uint64_t>::max()
               : a + b;
  };
  for (const PlannedIndices& p : plan) {
    if (p.footprint.cached) continue;
    memory = add(memory, p.footprint.memory_bytes);
    if (!p.footprint.cache_folder.empty()) {
      disk[p.footprint.cache_folder] = add(disk[p.footprint.cache_folder], p.footprint.disk_bytes);
    }
    if (largest == nullptr || p.footprint.memory_bytes > largest->footprint.memory_bytes) {
      largest = &p;
    }
  }
  if (largest == nullptr) return;
  const IndexFootprint& big = largest->footprint;
  const std::string why =
      str_cat(" (the largest, the ", split_name(largest->split), " split of ", largest->name,
              ": ", big.samples, " samples over ", big.epochs, " epochs of its data, set by ",
              sample_flags(largest->split), ")");
  const std::string what = str_cat("; lower ", sample_flags(largest->split),
                                   ", or give that split more data");
  const std::uint64_t memory_free = available_memory();
  MEGATRON_CHECK(memory <= memory_free, "building the dataset indices needs ", bytes_text(memory),
                 " of memory", why, ", but ", bytes_text(memory_free), " are available", what);
  for (const auto& [folder, bytes] : disk) {
    const std::uint64_t disk_free = free_disk(folder);
    MEGATRON_CHECK(bytes <= disk_free, "the dataset indices need ", bytes_text(bytes), " in ",
                   folder, why, ", but ", bytes_text(disk_free), " are free there", what,
                   " (or pass --data-cache-path on a larger disk)");
  }
}

class Builder {
 public:
  // With `plan`, a dry run: splits() records what each split would build and builds nothing.
  Builder(const GptDatasetConfig& config, Sources& sources, std::vector<PlannedIndices>* plan)
      : config_(config), sources_(sources), plan_(plan) {}

  // Opens `prefix` once; outside a dry run (which writes nothing, not even the token id range
  // cache) checks its token ids against the vocabulary, once.
  std::shared_ptr<const TokenSource> source(const std::string& prefix) {
    auto found = sources_.find(prefix);
    if (found == sources_.end()) {
      found = sources_
                  .emplace(prefix, std::make_shared<const IndexedTokenSource>(
                                       prefix, gpt_cache_folder(config_, prefix)))
                  .first;
    }
    if (plan_ == nullptr && config_.tokenizer.vocab_size > 0 && checked_.insert(prefix).second) {
      check_token_ids_fit_vocab(*found->second, config_.tokenizer.vocab_size);
    }
    return found->second;
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
      // A split nothing is drawn from (0 samples: --eval-iters 0) whose documents round to too
      // few tokens for a sample has no dataset. Megatron builds one and never finishes: its
      // _get_num_epochs adds epochs of 0 tokens until they reach 1.
      if (samples[s] == 0 && source->num_tokens(range.begin, range.end) <= 1) continue;
      if (plan_ != nullptr) {
        const std::string name =
            source->prefix().empty() ? std::string("mock data") : "dataset " + source->prefix();
        plan_->push_back({name, split,
                          GptDataset::footprint(*source, prefix, range, samples[s], split,
                                                config_)});
        continue;
      }
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
    if (plan_ != nullptr) return out;
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
  Sources& sources_;
  std::vector<PlannedIndices>* plan_;
  std::set<std::string> checked_;
};

std::array<std::shared_ptr<const SampleDataset>, 3> widen(const std::array<DatasetPtr, 3>& in) {
  return {in[0], in[1], in[2]};
}

// Builds every split, or with `plan` only records what each would build.
GptDatasets build_all(const DataPaths& paths, const SplitSamples& samples, GptDatasetConfig config,
                      Sources& sources, std::vector<PlannedIndices>* plan) {
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
    MEGATRON_CHECK(config.tokenizer.eod >= 0, "--mock-data: the tokenizer has no end-of-document token to end the mock "
                   "documents with; give --data-path");
    auto source =
        std::make_shared<const MockTokenSource>(config.tokenizer.eod, config.tokenizer.vocab_size);
    if (config.tokenizer.vocab_size > 0) {
      check_token_ids_fit_vocab(*source, config.tokenizer.vocab_size);
    }
    Builder builder(config, sources, plan);
    result.splits = widen(builder.splits(source, std::nullopt, *config.split_matrix, samples));
    result.split = config.split;
    return result;
  }

  if (!per_split) {
    if (!paths.split.has_value() && plan == nullptr) {
      log_warning(config.warning, std::string("--split not given; using Megatron's default \"") +
                                      kDefaultSplit + "\"");
    }
    config.split = paths.split.value_or(kDefaultSplit);
    config.split_matrix = parse_split(*config.split);
    const Blend blend = parse_blend(paths.data_path, "--data-path");
    // Validation during training asked for but impossible (a test share of 0 is common: quiet).
    const auto valid = static_cast<std::size_t>(Split::kValid);
    if (plan == nullptr && !(*config.split_matrix)[valid] && samples[valid].value_or(0) > 0) {
      log_warning(config.warning,
                  str_cat("--split \"", *config.split, "\" leaves the valid split of ",
                          blend.prefixes.size() == 1 ? "dataset " : "datasets ",
                          join(blend.prefixes, ", "), " empty, so no validation runs although ",
                          sample_flags(Split::kValid),
                          " ask for it; give the valid split a share in --split"));
    }
    Builder builder(config, sources, plan);
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
  Builder builder(config, sources, plan);
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

}  // namespace

GptDatasets build_gpt_datasets(const DataPaths& paths, const SplitSamples& samples,
                               GptDatasetConfig config) {
  Sources sources;
  if (config.build_policy == IndexBuildPolicy::kBuildIfMissing) {
    std::vector<PlannedIndices> plan;
    build_all(paths, samples, config, sources, &plan);
    check_index_budget(plan);
  }
  return build_all(paths, samples, std::move(config), sources, nullptr);
}

}  // namespace megatron::data
