// The low-level datasets a GptDataset reads token ids from (Megatron's IndexedDataset and
// MockGPTLowLevelDataset, spec 1 and 4.10), and the check that a dataset's token ids fit the
// tokenizer's vocabulary, run before training starts.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "megatron/data/indexed_dataset.h"

namespace megatron::data {

class TokenSource {
 public:
  virtual ~TokenSource() = default;

  // The dataset prefix; "" for mock data.
  virtual const std::string& prefix() const = 0;
  // Tokens per sequence (the units --split divides and documents index).
  virtual UnalignedArray<std::int32_t> sequence_lengths() const = 0;
  // Tokens in sequences [begin, end); 0 <= begin <= end <= num_sequences().
  virtual std::int64_t num_tokens(std::int64_t begin, std::int64_t end) const;
  // Copies `length` ids of `sequence` starting at token `offset` to `out`, widened to int64.
  // Throws megatron::Error when the range is outside the sequence.
  virtual void read(std::int64_t sequence, std::int64_t offset, std::int64_t length,
                    std::int64_t* out) const = 0;
  // The smallest and largest token id in the whole dataset (computed once, then remembered).
  virtual std::pair<std::int64_t, std::int64_t> token_id_range() const = 0;

  std::int64_t num_sequences() const {
    return static_cast<std::int64_t>(sequence_lengths().size());
  }
};

// An indexed dataset (`prefix.idx` + `prefix.bin`). The token id range is scanned from the .bin
// once and kept in `<cache_dir>/<md5 of the prefix>-token_id_range.json` (keyed by the .bin's
// size and modification time) when `cache_dir` is not empty, so later starts skip the scan.
class IndexedTokenSource : public TokenSource {
 public:
  IndexedTokenSource(const std::string& prefix, std::string cache_dir);

  const std::string& prefix() const override { return dataset_.prefix(); }
  UnalignedArray<std::int32_t> sequence_lengths() const override {
    return dataset_.sequence_lengths();
  }
  std::int64_t num_tokens(std::int64_t begin, std::int64_t end) const override;
  void read(std::int64_t sequence, std::int64_t offset, std::int64_t length,
            std::int64_t* out) const override;
  std::pair<std::int64_t, std::int64_t> token_id_range() const override;

  // The underlying .idx/.bin reader.
  const IndexedDataset& dataset() const { return dataset_; }
  // Whether the last token_id_range() came from the cache file (for tests).
  bool range_from_cache() const { return range_from_cache_; }

 private:
  IndexedDataset dataset_;
  std::string cache_dir_;
  mutable std::once_flag range_once_;
  mutable std::pair<std::int64_t, std::int64_t> range_{0, 0};
  mutable bool range_from_cache_ = false;
};

// MockGPTLowLevelDataset: 100,000 sequences with lengths
// numpy.random.default_rng(0).integers(1, 4096, 100000, dtype=int32); sequence i holds
// 1, 2, ..., len - 1 (each mod vocab_size) followed by the EOD id.
class MockTokenSource : public TokenSource {
 public:
  static constexpr std::size_t kSize = 100000;
  static constexpr std::int32_t kMaxSequenceLength = 4096;

  MockTokenSource(std::int64_t eod, std::uint64_t vocab_size);

  const std::string& prefix() const override { return prefix_; }
  UnalignedArray<std::int32_t> sequence_lengths() const override { return lengths_; }
  void read(std::int64_t sequence, std::int64_t offset, std::int64_t length,
            std::int64_t* out) const override;
  std::pair<std::int64_t, std::int64_t> token_id_range() const override;

 private:
  std::string prefix_;
  std::vector<std::int32_t> lengths_;
  std::int64_t eod_;
  std::uint64_t vocab_size_;
};

// Throws megatron::Error before training when a token id of `source` is negative or not below
// `vocab_size`, naming the dataset prefix, the offending id and the vocabulary size.
void check_token_ids_fit_vocab(const TokenSource& source, std::uint64_t vocab_size);

}  // namespace megatron::data
