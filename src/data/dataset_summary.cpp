// summarize() / format_summary(): counts, token id range and length distributions of a dataset.
// Percentiles are nearest-rank (the smallest value with at least p% of the values at or below
// it), so they are always lengths that occur in the data.
#include "megatron/data/dataset_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>

#include "megatron/core/strings.h"

namespace megatron::data {
namespace {

// Reorders `values` (nth_element) to pick the percentiles in linear time.
LengthStats length_stats(std::vector<std::uint64_t>& values) {
  LengthStats stats;
  stats.count = values.size();
  if (values.empty()) return stats;
  long double sum = 0;
  stats.min = std::numeric_limits<std::uint64_t>::max();
  for (const std::uint64_t v : values) {
    sum += static_cast<long double>(v);
    stats.min = std::min(stats.min, v);
    stats.max = std::max(stats.max, v);
    stats.zero_count += v == 0 ? 1 : 0;
  }
  stats.mean = static_cast<double>(sum / static_cast<long double>(values.size()));
  const auto percentile = [&](int p) {
    const auto n = static_cast<std::uint64_t>(values.size());
    std::uint64_t rank = (n * static_cast<std::uint64_t>(p) + 99) / 100;  // ceil(p/100 * n)
    rank = std::max<std::uint64_t>(rank, 1);
    const auto nth = values.begin() + static_cast<std::ptrdiff_t>(rank - 1);
    std::nth_element(values.begin(), nth, values.end());
    return *nth;
  };
  stats.p50 = percentile(50);
  stats.p90 = percentile(90);
  stats.p99 = percentile(99);
  return stats;
}

void token_range(const IndexedDataset& dataset, DatasetSummary& summary) {
  const std::span<const std::uint8_t> bytes = dataset.bin_bytes();
  if (dataset.num_tokens() == 0) return;
  visit_dtype(dataset.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const std::size_t n = bytes.size() / sizeof(T);
    T lo = std::numeric_limits<T>::max();
    T hi = std::numeric_limits<T>::lowest();
    // The .bin map is page-aligned and holds whole elements, so T* access is aligned.
    const T* tokens = reinterpret_cast<const T*>(bytes.data());
    for (std::size_t i = 0; i < n; ++i) {
      lo = std::min(lo, tokens[i]);
      hi = std::max(hi, tokens[i]);
    }
    summary.min_token_id = static_cast<std::int64_t>(lo);
    summary.max_token_id = static_cast<std::int64_t>(hi);
  });
}

std::string format_stats(const LengthStats& s) {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "min %llu  mean %.1f  p50 %llu  p90 %llu  p99 %llu  max %llu  empty %llu",
                static_cast<unsigned long long>(s.min), s.mean,
                static_cast<unsigned long long>(s.p50), static_cast<unsigned long long>(s.p90),
                static_cast<unsigned long long>(s.p99), static_cast<unsigned long long>(s.max),
                static_cast<unsigned long long>(s.zero_count));
  return buf;
}

}  // namespace

DatasetSummary summarize(const IndexedDataset& dataset) {
  DatasetSummary summary;
  summary.prefix = dataset.prefix();
  summary.dtype = dtype_name(dataset.dtype());
  summary.documents = dataset.num_documents();
  summary.sequences = dataset.num_sequences();
  summary.tokens = dataset.num_tokens();
  summary.bin_bytes = dataset.bin_bytes().size();
  // The reader checked that the .idx is exactly this long.
  summary.idx_bytes = kIndexHeaderBytes + 12 * summary.sequences + 8 * (summary.documents + 1);
  token_range(dataset, summary);

  const std::span<const std::int32_t> lengths = dataset.sequence_lengths();
  std::vector<std::uint64_t> values(lengths.begin(), lengths.end());
  summary.sequence_tokens = length_stats(values);

  const std::span<const std::int64_t> docs = dataset.document_indices();
  values.assign(summary.documents, 0);
  for (std::size_t d = 0; d < summary.documents; ++d) {
    for (auto s = docs[d]; s < docs[d + 1]; ++s) {
      values[d] += static_cast<std::uint64_t>(lengths[s]);
    }
  }
  summary.document_tokens = length_stats(values);
  return summary;
}

std::string format_summary(const DatasetSummary& s) {
  std::ostringstream out;
  out << "dataset          " << s.prefix << "\n"
      << "dtype            " << s.dtype << "\n"
      << "documents        " << s.documents << "\n"
      << "sequences        " << s.sequences << "\n"
      << "tokens           " << s.tokens << "\n";
  if (s.tokens > 0) {
    out << "token ids        " << s.min_token_id << " .. " << s.max_token_id << "\n";
  } else {
    out << "token ids        (none)\n";
  }
  out << "files            .bin " << human_bytes(s.bin_bytes) << ", .idx "
      << human_bytes(s.idx_bytes) << "\n"
      << "document tokens  " << format_stats(s.document_tokens) << "\n"
      << "sequence tokens  " << format_stats(s.sequence_tokens) << "\n";
  return out.str();
}

}  // namespace megatron::data
