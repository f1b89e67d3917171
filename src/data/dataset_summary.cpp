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
#include <vector>

#include "megatron/core/strings.h"

namespace megatron::data {
namespace {

// Length counts for exact nearest-rank percentiles in bounded memory: one counter per length
// below kDense, the longer lengths (rare in text) kept as values for nth_element.
class LengthHistogram {
 public:
  static constexpr std::uint64_t kDense = std::uint64_t{1} << 16;

  void add(std::uint64_t v) {
    ++stats_.count;
    sum_ += static_cast<long double>(v);
    stats_.min = std::min(stats_.min, v);
    stats_.max = std::max(stats_.max, v);
    stats_.zero_count += v == 0 ? 1 : 0;
    if (v < kDense) {
      ++dense_[v];
    } else {
      long_.push_back(v);
    }
  }

  LengthStats stats() {
    LengthStats out = stats_;
    if (out.count == 0) return LengthStats{};
    out.mean = static_cast<double>(sum_ / static_cast<long double>(out.count));
    out.p50 = percentile(50);
    out.p90 = percentile(90);
    out.p99 = percentile(99);
    return out;
  }

 private:
  std::uint64_t percentile(int p) {
    const std::uint64_t n = stats_.count;
    std::uint64_t rank = (n * static_cast<std::uint64_t>(p) + 99) / 100;  // ceil(p/100 * n)
    rank = std::max<std::uint64_t>(rank, 1);
    std::uint64_t seen = 0;
    for (std::uint64_t v = 0; v < kDense; ++v) {
      seen += dense_[v];
      if (seen >= rank) return v;
    }
    const auto nth = long_.begin() + static_cast<std::ptrdiff_t>(rank - seen - 1);
    std::nth_element(long_.begin(), nth, long_.end());
    return *nth;
  }

  LengthStats stats_{.min = std::numeric_limits<std::uint64_t>::max()};
  long double sum_ = 0;
  std::vector<std::uint64_t> dense_ = std::vector<std::uint64_t>(kDense, 0);
  std::vector<std::uint64_t> long_;
};

// Passes over the maps drop the pages they read every this many elements, so the resident set
// stays small however large the dataset (the pages stay in the page cache).
constexpr std::size_t kReleaseEvery = std::size_t{1} << 20;

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
      if ((i + 1) % kReleaseEvery == 0) dataset.release_mapped_pages();
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

  const UnalignedArray<std::int32_t> lengths = dataset.sequence_lengths();
  LengthHistogram sequences;
  for (std::size_t s = 0; s < lengths.size(); ++s) {
    sequences.add(static_cast<std::uint64_t>(lengths[s]));
    if ((s + 1) % kReleaseEvery == 0) dataset.release_mapped_pages();
  }
  summary.sequence_tokens = sequences.stats();

  const UnalignedArray<std::int64_t> docs = dataset.document_indices();
  LengthHistogram documents;
  for (std::size_t d = 0; d < summary.documents; ++d) {
    documents.add(dataset.num_tokens(static_cast<std::size_t>(docs[d]),
                                     static_cast<std::size_t>(docs[d + 1])));
    if ((d + 1) % kReleaseEvery == 0) dataset.release_mapped_pages();
  }
  summary.document_tokens = documents.stats();
  dataset.release_mapped_pages();
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
