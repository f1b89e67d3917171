// Megatron's BlendedDataset (spec 4.9): items drawn from several GptDatasets by the
// deterministic largest-error rule of helpers.cpp build_blending_indices (or the exhaustive
// variant when no size is given), cached under --data-cache-path as
// `<md5>-BlendedDataset-<split>-{description.txt,dataset_index.npy,dataset_sample_index.npy}`.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "megatron/data/gpt_dataset.h"

namespace megatron::data {

// build_blending_indices: for k in [0, size), x = max(k, 1), pick the first i with the largest
// weights[i] * x - count[i]; dataset_index[k] = i, dataset_sample_index[k] = count[i]++.
void build_blending_indices(std::span<const double> weights, std::uint64_t size,
                            std::vector<std::int16_t>& dataset_index,
                            std::vector<std::int64_t>& dataset_sample_index);

// build_exhaustive_blending_indices: exactly sizes[i] items of each dataset, the same error
// rule over the datasets that still have items (weights sizes[i] / sum(sizes)).
void build_exhaustive_blending_indices(std::span<const std::int64_t> sizes,
                                       std::vector<std::int16_t>& dataset_index,
                                       std::vector<std::int64_t>& dataset_sample_index);

class BlendedDataset : public SampleDataset {
 public:
  // With `size`: `weights` are normalised (numpy's float64 normalize) and `size` items blended.
  // Without: `weights` are whole item counts per dataset (the exhaustive blend, printed as
  // integers). Throws when an item count exceeds a dataset's length, naming the dataset and
  // --mid-level-dataset-surplus.
  BlendedDataset(std::vector<std::shared_ptr<const GptDataset>> datasets,
                 std::vector<double> weights, std::optional<std::uint64_t> size,
                 const GptDatasetConfig& config);

  std::uint64_t size() const override { return dataset_index_.size(); }
  std::int32_t sequence_length() const override { return datasets_[0]->sequence_length(); }
  const SampleOptions& sample_options() const override { return datasets_[0]->sample_options(); }
  void read_text(std::uint64_t k, std::span<std::int64_t> text) const override;
  std::int32_t dataset_id(std::uint64_t k) const override;

  const std::vector<std::shared_ptr<const GptDataset>>& datasets() const { return datasets_; }
  const std::vector<double>& weights() const { return weights_; }
  const std::string& description() const { return description_; }
  const std::string& description_hash() const { return hash_; }
  bool built_anew() const { return built_anew_; }
  const IndexArray& dataset_index() const { return dataset_index_; }
  const IndexArray& dataset_sample_index() const { return dataset_sample_index_; }

 private:
  void build_indices(const GptDatasetConfig& config);

  std::vector<std::shared_ptr<const GptDataset>> datasets_;
  std::vector<double> weights_;
  std::optional<std::uint64_t> size_;
  std::string description_;
  std::string hash_;
  bool built_anew_ = false;
  IndexArray dataset_index_;
  IndexArray dataset_sample_index_;
};

}  // namespace megatron::data
