// Blending indices and the cached BlendedDataset (see blended_dataset.h).
#include "megatron/data/blended_dataset.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "megatron/core/check.h"
#include "megatron/data/md5.h"

namespace megatron::data {
namespace {

const std::vector<std::string> kArrayNames = {"dataset_index", "dataset_sample_index"};

std::string array_problem(const std::vector<IndexArray>& arrays) {
  const IndexArray& ids = arrays[0];
  const IndexArray& samples = arrays[1];
  if (ids.dtype() != NpyDType::kInt16 || ids.shape().size() != 1) {
    return "dataset_index is not a 1-D int16 array";
  }
  if (samples.dtype() != NpyDType::kInt64 || samples.shape().size() != 1 ||
      samples.size() != ids.size()) {
    return "dataset_sample_index is not a 1-D int64 array as long as dataset_index";
  }
  return "";
}

}  // namespace

void build_blending_indices(std::span<const double> weights, std::uint64_t size,
                            std::vector<std::int16_t>& dataset_index,
                            std::vector<std::int64_t>& dataset_sample_index) {
  MEGATRON_ASSERT(!weights.empty() && weights.size() < 32767);
  dataset_index.assign(size, 0);
  dataset_sample_index.assign(size, 0);
  std::vector<std::int64_t> counts(weights.size(), 0);
  for (std::uint64_t k = 0; k < size; ++k) {
    const double x = std::max(static_cast<double>(k), 1.0);
    std::size_t best = 0;
    double best_error = weights[0] * x - static_cast<double>(counts[0]);
    for (std::size_t i = 1; i < weights.size(); ++i) {
      const double error = weights[i] * x - static_cast<double>(counts[i]);
      if (error > best_error) {
        best_error = error;
        best = i;
      }
    }
    dataset_index[k] = static_cast<std::int16_t>(best);
    dataset_sample_index[k] = counts[best]++;
  }
}

void build_exhaustive_blending_indices(std::span<const std::int64_t> sizes,
                                       std::vector<std::int16_t>& dataset_index,
                                       std::vector<std::int64_t>& dataset_sample_index) {
  MEGATRON_ASSERT(!sizes.empty() && sizes.size() < 32767);
  std::int64_t total = 0;
  std::set<std::size_t> unspent;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    total += sizes[i];
    if (sizes[i] > 0) unspent.insert(i);
  }
  std::vector<double> weights(sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    weights[i] = static_cast<double>(sizes[i]) / static_cast<double>(total);
  }
  dataset_index.assign(static_cast<std::size_t>(total), 0);
  dataset_sample_index.assign(static_cast<std::size_t>(total), 0);
  std::vector<std::int64_t> counts(sizes.size(), 0);
  for (std::int64_t k = 0; !unspent.empty(); ++k) {
    const double x = std::max(static_cast<double>(k), 1.0);
    std::size_t best = 0;
    double best_error = std::numeric_limits<double>::lowest();
    bool found = false;
    for (std::size_t i : unspent) {
      const double error = weights[i] * x - static_cast<double>(counts[i]);
      if (!found || error > best_error) {
        best = i;
        best_error = error;
        found = true;
      }
    }
    dataset_index[static_cast<std::size_t>(k)] = static_cast<std::int16_t>(best);
    dataset_sample_index[static_cast<std::size_t>(k)] = counts[best]++;
    if (counts[best] == sizes[best]) unspent.erase(best);
  }
}

BlendedDataset::BlendedDataset(std::vector<std::shared_ptr<const GptDataset>> datasets,
                               std::vector<double> weights, std::optional<std::uint64_t> size,
                               const GptDatasetConfig& config)
    : datasets_(std::move(datasets)), weights_(std::move(weights)), size_(size) {
  MEGATRON_ASSERT(!datasets_.empty() && datasets_.size() == weights_.size() &&
                  datasets_.size() < 32767);
  if (size_.has_value()) weights_ = normalize_weights(weights_);
  PyJson identifiers = PyJson::dict();
  identifiers.set("class", "BlendedDataset");
  PyJson list{PyJson::List{}};
  for (const auto& dataset : datasets_) list.push_back(dataset->unique_identifiers());
  identifiers.set("datasets", std::move(list));
  identifiers.set("split", split_name(datasets_[0]->split()));
  PyJson weights_json{PyJson::List{}};
  for (double w : weights_) {
    weights_json.push_back(size_.has_value() ? PyJson(w) : PyJson(static_cast<std::int64_t>(w)));
  }
  identifiers.set("weights", std::move(weights_json));
  identifiers.set("size", size_.has_value() ? PyJson(*size_) : PyJson());
  description_ = identifiers.dumps(4);
  hash_ = md5_hex(description_);

  if (config.data_cache_path.empty()) {
    build_indices(config);
    return;
  }
  const IndexCache cache(config.data_cache_path,
                         hash_ + "-BlendedDataset-" + split_name(datasets_[0]->split()),
                         kArrayNames);
  if (cache.complete()) {
    std::string problem;
    auto arrays = cache.load(description_, problem);
    if (arrays.has_value()) problem = array_problem(*arrays);
    if (problem.empty()) {
      dataset_index_ = (*arrays)[0];
      dataset_sample_index_ = (*arrays)[1];
      return;
    }
    const std::string message = "the cached BlendedDataset indices in " + config.data_cache_path +
                                " are unusable (" + problem + ")";
    MEGATRON_CHECK(config.build_policy != IndexBuildPolicy::kLoadOnly, message,
                   "; delete them and start again so rank 0 rebuilds them");
    log_warning(config.warning, message + "; rebuilding them");
  }
  MEGATRON_CHECK(config.build_policy != IndexBuildPolicy::kLoadOnly,
                 "the BlendedDataset indices are not in ", config.data_cache_path, " (expected ",
                 cache.description_path(), "); rank 0 builds them: check that every rank sees ",
                 "the same --data-cache-path on a shared file system");
  build_indices(config);
  cache.save(description_, {dataset_index_, dataset_sample_index_});
}

void BlendedDataset::build_indices(const GptDatasetConfig& config) {
  if (config.info) config.info("Build and save the BlendedDataset indices");
  std::vector<std::int16_t> ids;
  std::vector<std::int64_t> samples;
  if (size_.has_value()) {
    build_blending_indices(weights_, *size_, ids, samples);
  } else {
    std::vector<std::int64_t> sizes;
    for (double w : weights_) sizes.push_back(static_cast<std::int64_t>(w));
    build_exhaustive_blending_indices(sizes, ids, samples);
  }
  std::vector<std::int64_t> counts(datasets_.size(), 0);
  for (std::int16_t id : ids) ++counts[static_cast<std::size_t>(id)];
  for (std::size_t i = 0; i < datasets_.size(); ++i) {
    MEGATRON_CHECK(static_cast<std::uint64_t>(counts[i]) <= datasets_[i]->size(), "the ",
                   split_name(datasets_[i]->split()), " blend oversamples its datasets: it takes ",
                   counts[i], " samples from dataset ", i, " (", datasets_[i]->source().prefix(),
                   ") which has ", datasets_[i]->size(),
                   "; raise --mid-level-dataset-surplus (now ", config.mid_level_dataset_surplus,
                   "), e.g. two- or ten-fold");
  }
  dataset_index_ = IndexArray::from_vector(std::move(ids));
  dataset_sample_index_ = IndexArray::from_vector(std::move(samples));
  built_anew_ = true;
}

void BlendedDataset::read_text(std::uint64_t k, std::span<std::int64_t> text) const {
  MEGATRON_CHECK(k < size(), "BlendedDataset: sample ", k, " requested, it has ", size());
  const std::int32_t id = dataset_id(k);
  MEGATRON_CHECK(id >= 0 && static_cast<std::size_t>(id) < datasets_.size(),
                 "BlendedDataset: cached dataset index ", id, " is not one of the ",
                 datasets_.size(), " datasets");
  datasets_[static_cast<std::size_t>(id)]->read_text(
      static_cast<std::uint64_t>(dataset_sample_index_.at(k)), text);
}

std::int32_t BlendedDataset::dataset_id(std::uint64_t k) const {
  return static_cast<std::int32_t>(dataset_index_.at(k));
}

}  // namespace megatron::data
