// Megatron's GPTDataset (spec 4.3-4.8): one split of one low-level dataset, its document /
// sample / shuffle indices built once with Megatron's algorithms and RNG, cached as .npy files
// named by the MD5 of the description JSON, and only mapped on later starts. Samples are read
// into caller buffers (see gpt_sample.h). Also the SampleDataset interface the trainer reads
// train / valid / test data through (GptDataset or BlendedDataset).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "megatron/data/dataset_split.h"
#include "megatron/data/gpt_sample.h"
#include "megatron/data/index_cache.h"
#include "megatron/data/npy.h"
#include "megatron/data/python_json.h"
#include "megatron/data/token_source.h"

namespace megatron::data {

// What the datasets need from the tokenizer. `identifiers` is the tokenizer's
// unique_identifiers dict as Megatron prints it into descriptions (class path, files, extra
// arguments, in Megatron's key order); it only names the cache files, so a dict that differs
// from Megatron's gives different file names, never different samples.
struct TokenizerInfo {
  std::uint64_t vocab_size = 0;
  std::int64_t eod = 0;
  std::optional<std::int64_t> pad;  // none, or equal to eod: Megatron's -1
  PyJson identifiers = PyJson::dict();
};

// kLoadOnly is for ranks other than 0: rank 0 builds the caches, a barrier, then the others
// map them; a missing or unusable cache is then an error instead of a second build.
enum class IndexBuildPolicy : std::uint8_t { kBuildIfMissing, kLoadOnly };

// A log line sink; called only while datasets are built, never kept by a built dataset.
using DatasetLog = std::function<void(const std::string&)>;

struct GptDatasetConfig {
  std::uint32_t random_seed = 1234;  // --seed
  std::int32_t sequence_length = 0;  // --seq-length
  // The --split text as given and its matrix; both none with --train/valid/test-data-path.
  std::optional<std::string> split;
  std::optional<SplitMatrix> split_matrix;
  TokenizerInfo tokenizer;
  std::string data_cache_path;  // --data-cache-path; "" = <prefix>/cache/GPTDataset_indices
  bool mock = false;            // --mock-data (MockGPTDataset; cached only with a cache path)
  bool reset_position_ids = false;
  bool reset_attention_mask = false;
  bool eod_mask_loss = false;
  bool drop_last_partial_validation_sequence = true;
  bool add_extra_token_to_sequence = true;
  double mid_level_dataset_surplus = 0.005;  // --mid-level-dataset-surplus
  IndexBuildPolicy build_policy = IndexBuildPolicy::kBuildIfMissing;
  DatasetLog info;     // Megatron's INFO lines ("Build and save the GPTDataset train indices")
  DatasetLog warning;  // problems worked around (a corrupt cache rebuilt); empty: stderr

  // Megatron's pad id for samples: tokenizer.pad unless absent or equal to eod, then -1.
  std::int64_t pad_id() const;
  SampleOptions sample_options() const;
};

// A dataset of fixed-length samples: a GptDataset or a blend of them.
class SampleDataset {
 public:
  virtual ~SampleDataset() = default;
  virtual std::uint64_t size() const = 0;
  virtual std::int32_t sequence_length() const = 0;
  virtual const SampleOptions& sample_options() const = 0;
  // Item k's S + 1 token ids (S with add_extra_token_to_sequence off), padded with the pad id
  // when the data runs out (only a final partial validation sample). k < size().
  virtual void read_text(std::uint64_t k, std::span<std::int64_t> text) const = 0;
  // Which dataset of a blend item k comes from (Megatron's dataset_id); 0 otherwise.
  virtual std::int32_t dataset_id(std::uint64_t k) const { return 0; }

  // read_text then make_sample: Megatron's __getitem__(k) into `out`.
  void read_sample(std::uint64_t k, const SampleBuffers& out) const;
};

// What building one split's indices takes (spec 4.3-4.6), known before anything is built.
struct IndexFootprint {
  bool cached = false;           // complete cache files exist: they are mapped, not built
  std::string cache_folder;      // "" for uncached mock data
  std::uint64_t epochs = 0;
  std::uint64_t samples = 0;     // samples the indices cover
  std::uint64_t memory_bytes = 0;  // peak memory while building
  std::uint64_t disk_bytes = 0;    // the .npy files in the cache folder
};

class GptDataset : public SampleDataset {
 public:
  // The footprint of GptDataset(source, dataset_path, documents, num_samples, split, config)
  // without building it; sizes saturate instead of overflowing. Throws like the constructor
  // for a split too small to hold a sample.
  static IndexFootprint footprint(const TokenSource& source,
                                  const std::optional<std::string>& dataset_path,
                                  IndexRange documents, std::optional<std::int64_t> num_samples,
                                  Split split, const GptDatasetConfig& config);

  // One split of `source`: sequences [documents.begin, documents.end), `num_samples` samples
  // requested (none: one epoch). `dataset_path` is the prefix printed into the description
  // (none for mock data). Maps the cached indices when the cache is complete and matches,
  // otherwise builds them (and writes the cache unless the dataset is an uncached mock).
  GptDataset(std::shared_ptr<const TokenSource> source, std::optional<std::string> dataset_path,
             IndexRange documents, std::optional<std::int64_t> num_samples, Split split,
             const GptDatasetConfig& config);

  std::uint64_t size() const override { return shuffle_index_.size(); }
  std::int32_t sequence_length() const override { return config_.sequence_length; }
  const SampleOptions& sample_options() const override { return options_; }
  void read_text(std::uint64_t k, std::span<std::int64_t> text) const override;

  // "GPTDataset" or "MockGPTDataset".
  const std::string& class_name() const { return class_name_; }
  Split split() const { return split_; }
  std::optional<std::int64_t> num_samples() const { return num_samples_; }
  // Megatron's unique_identifiers, its json.dumps(indent=4) text and that text's MD5.
  const PyJson& unique_identifiers() const { return identifiers_; }
  const std::string& description() const { return description_; }
  const std::string& description_hash() const { return hash_; }
  // The cache folder ("" when not cached) and whether this process built the indices.
  const std::string& cache_folder() const { return cache_folder_; }
  bool built_anew() const { return built_anew_; }

  const IndexArray& document_index() const { return document_index_; }
  const IndexArray& sample_index() const { return sample_index_; }
  const IndexArray& shuffle_index() const { return shuffle_index_; }
  const TokenSource& source() const { return *source_; }

 private:
  void build_indices();
  bool load_indices(const IndexCache& cache);
  std::string stale_problem(const std::vector<IndexArray>& arrays) const;

  std::shared_ptr<const TokenSource> source_;
  GptDatasetConfig config_;
  SampleOptions options_;
  std::optional<std::string> dataset_path_;
  IndexRange documents_;
  std::optional<std::int64_t> num_samples_;
  Split split_;
  std::string class_name_;
  PyJson identifiers_;
  std::string description_;
  std::string hash_;
  std::string cache_folder_;
  bool built_anew_ = false;
  IndexArray document_index_;
  IndexArray sample_index_;
  IndexArray shuffle_index_;
};

// The cache folder of a dataset: config.data_cache_path, else <prefix>/cache/GPTDataset_indices
// ("" for mock data without a cache path).
std::string gpt_cache_folder(const GptDatasetConfig& config, const std::string& prefix);

// Throws megatron::Error when sequences `documents` of `source` hold fewer than 2 tokens (no
// sample can be built), naming the split, the dataset prefix and the --split share it got.
void check_split_has_tokens(const TokenSource& source, IndexRange documents, Split split,
                            const GptDatasetConfig& config);

// Writes `message` through `log`, or to stderr as "WARNING: message" when `log` is empty.
void log_warning(const DatasetLog& log, const std::string& message);

}  // namespace megatron::data
