// Megatron's BlendedMegatronDatasetBuilder for GPT (spec 4.9, 4.10): the train / valid / test
// datasets from --data-path (one prefix, or a weighted or unweighted blend, divided by
// --split), from --train/valid/test-data-path (each split its own blend over whole datasets),
// or mock data. Every low-level dataset's token ids are checked against the tokenizer's
// vocabulary before anything is built.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "megatron/data/blended_dataset.h"
#include "megatron/data/gpt_dataset.h"

namespace megatron::data {

// The data flags (spec 6.6) as given on the command line.
struct DataPaths {
  std::vector<std::string> data_path;  // --data-path [w1] p1 [w2] p2 ...
  std::vector<std::string> train_data_path;
  std::vector<std::string> valid_data_path;
  std::vector<std::string> test_data_path;
  bool mock_data = false;            // --mock-data
  std::optional<std::string> split;  // --split (none: Megatron's default for the case)
};

// Requested samples per split (spec 4.1); none = one pass over the data.
using SplitSamples = std::array<std::optional<std::int64_t>, 3>;

struct GptDatasets {
  // Per split (train, valid, test): the dataset, or null when the split is empty.
  std::array<std::shared_ptr<const SampleDataset>, 3> splits;
  // The resolved split text ("969, 30, 1" when defaulted, none for per-split paths).
  std::optional<std::string> split;

  const SampleDataset* train() const { return splits[0].get(); }
  const SampleDataset* valid() const { return splits[1].get(); }
  const SampleDataset* test() const { return splits[2].get(); }
};

// Builds (or maps from the caches) every split. `config` supplies seed, sequence length,
// tokenizer, cache path, flags and build policy; its split / split_matrix / mock fields are
// set here from `paths`. Throws megatron::Error for conflicting flags (--split with per-split
// paths), unreadable datasets, token ids outside the vocabulary, weights without a sample
// count, and blends that oversample a dataset.
GptDatasets build_gpt_datasets(const DataPaths& paths, const SplitSamples& samples,
                               GptDatasetConfig config);

}  // namespace megatron::data
