// Statistics users check their data with (the dataset_info tool): counts, dtype and the
// distribution of document and sequence lengths.
#pragma once

#include <cstdint>
#include <string>

#include "megatron/data/indexed_dataset.h"

namespace megatron::data {

struct LengthStats {
  std::uint64_t count = 0;
  std::uint64_t min = 0;
  std::uint64_t max = 0;
  double mean = 0.0;
  std::uint64_t p50 = 0;
  std::uint64_t p90 = 0;
  std::uint64_t p99 = 0;
  std::uint64_t zero_count = 0;  // empty documents / sequences
};

struct DatasetSummary {
  std::string prefix;
  std::string dtype;
  std::uint64_t documents = 0;
  std::uint64_t sequences = 0;
  std::uint64_t tokens = 0;
  std::uint64_t bin_bytes = 0;
  std::uint64_t idx_bytes = 0;
  std::int64_t min_token_id = 0;  // over all tokens (0 when empty)
  std::int64_t max_token_id = 0;
  LengthStats document_tokens;
  LengthStats sequence_tokens;
};

// Scans the whole .bin once for the token id range.
DatasetSummary summarize(const IndexedDataset& dataset);

// Human-readable, multi-line.
std::string format_summary(const DatasetSummary& summary);

}  // namespace megatron::data
