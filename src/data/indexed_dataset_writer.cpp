// IndexedDatasetWriter: Megatron's IndexedDatasetBuilder (spec 1.4). Token ids stream into the
// .bin temporary; lengths and document indices stay in memory until finalize() writes the .idx
// (spec 1.1). Each add_* either appends a whole document or throws before writing anything.
#include <algorithm>
#include <bit>
#include <filesystem>
#include <limits>
#include <type_traits>

#include "megatron/core/check.h"
#include "megatron/data/indexed_dataset.h"

namespace megatron::data {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the .idx/.bin formats are little-endian; big-endian hosts are not supported");

constexpr std::size_t kCopyChunkBytes = 64 << 20;
constexpr std::size_t kPointerChunk = 1 << 20;

// The int32 ids a dtype holds exactly (float32: integers up to 2^24).
template <typename T>
constexpr std::int64_t lowest_id() {
  if constexpr (std::is_same_v<T, float>) {
    return -(std::int64_t{1} << 24);
  } else if constexpr (std::is_floating_point_v<T> || sizeof(T) >= 4) {
    return std::numeric_limits<std::int32_t>::min();
  } else {
    return std::numeric_limits<T>::min();
  }
}

template <typename T>
constexpr std::int64_t highest_id() {
  if constexpr (std::is_same_v<T, float>) {
    return std::int64_t{1} << 24;
  } else if constexpr (std::is_floating_point_v<T> || sizeof(T) >= 4) {
    return std::numeric_limits<std::int32_t>::max();
  } else {
    return std::numeric_limits<T>::max();
  }
}

// Converts `tokens` to T in `scratch` (one fused pass: range flag and store, so the loop
// vectorises) and returns the converted bytes, or throws naming the first id that does not fit.
template <typename T>
std::span<const std::uint8_t> convert_tokens(std::span<const std::int32_t> tokens, DType dtype,
                                             std::vector<std::uint8_t>& scratch) {
  constexpr std::int64_t kLow = lowest_id<T>();
  constexpr std::int64_t kHigh = highest_id<T>();
  scratch.resize(tokens.size() * sizeof(T));
  // vector<uint8_t> storage comes from operator new, aligned for any T here.
  T* out = reinterpret_cast<T*>(scratch.data());
  const std::int32_t* in = tokens.data();
  const std::size_t n = tokens.size();
  bool out_of_range = false;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t id = in[i];
    out_of_range |= (id < kLow) | (id > kHigh);
    out[i] = static_cast<T>(id);
  }
  if (__builtin_expect(out_of_range, 0)) {
    const auto bad = std::find_if(tokens.begin(), tokens.end(),
                                  [](std::int32_t id) { return id < kLow || id > kHigh; });
    MEGATRON_FAIL("token id ", *bad, " (position ", bad - tokens.begin(),
                  " of the document) does not fit the dataset dtype ", dtype_name(dtype), " [",
                  kLow, ", ", kHigh, "]; a vocabulary of 65500 or more tokens needs int32");
  }
  return scratch;
}

}  // namespace

IndexedDatasetWriter::IndexedDatasetWriter(std::string prefix, DType dtype)
    : prefix_(std::move(prefix)), dtype_(dtype) {
  check_writable_parent(data_path(prefix_), "output dataset");
  bin_ = std::make_unique<AtomicFile>(data_path(prefix_));
  idx_ = std::make_unique<AtomicFile>(index_path(prefix_));
}

void IndexedDatasetWriter::add_document(std::span<const std::int32_t> tokens,
                                        UnalignedArray<std::int32_t> sequence_lengths) {
  MEGATRON_ASSERT(!finalized_, "add_document after finalize on ", prefix_);
  std::int64_t total = 0;
  for (const std::int32_t length : sequence_lengths) {
    MEGATRON_CHECK(length >= 0, prefix_, ": document ", num_documents(),
                   " has a negative sequence length ", length);
    total += length;
  }
  MEGATRON_CHECK(total == static_cast<std::int64_t>(tokens.size()), prefix_, ": document ",
                 num_documents(), " has ", tokens.size(),
                 " tokens but its sequence lengths sum to ", total);

  if (dtype_ == DType::kInt32) {
    bin_->write(tokens.data(), tokens.size_bytes());
  } else {
    const std::span<const std::uint8_t> bytes = visit_dtype(dtype_, [&](auto zero) {
      return convert_tokens<decltype(zero)>(tokens, dtype_, scratch_);
    });
    bin_->write(bytes.data(), bytes.size());
  }
  lengths_.insert(lengths_.end(), sequence_lengths.begin(), sequence_lengths.end());
  document_indices_.push_back(static_cast<std::int64_t>(lengths_.size()));
  num_tokens_ += tokens.size();
}

void IndexedDatasetWriter::add_index(const IndexedDataset& other) {
  MEGATRON_ASSERT(!finalized_, "add_index after finalize on ", prefix_);
  MEGATRON_CHECK(other.dtype() == dtype_, "cannot append ", index_path(other.prefix()), " (",
                 dtype_name(other.dtype()), ") to ", index_path(prefix_), " (", dtype_name(dtype_),
                 "): the token dtypes differ");
  const std::span<const std::uint8_t> bytes = other.bin_bytes();
  for (std::size_t at = 0; at < bytes.size(); at += kCopyChunkBytes) {
    bin_->write(bytes.data() + at, std::min(kCopyChunkBytes, bytes.size() - at));
  }
  const auto offset = static_cast<std::int64_t>(lengths_.size());
  const UnalignedArray<std::int32_t> lengths = other.sequence_lengths();
  lengths_.insert(lengths_.end(), lengths.begin(), lengths.end());
  const UnalignedArray<std::int64_t> docs = other.document_indices();
  document_indices_.reserve(document_indices_.size() + docs.size() - 1);
  for (std::size_t d = 1; d < docs.size(); ++d) document_indices_.push_back(docs[d] + offset);
  num_tokens_ += other.num_tokens();
}

void IndexedDatasetWriter::finalize() {
  MEGATRON_ASSERT(!finalized_, "finalize called twice on ", prefix_);
  const std::uint64_t sequences = lengths_.size();
  const std::uint64_t documents = document_indices_.size();
  const auto code = static_cast<std::uint8_t>(dtype_);
  idx_->write(kIndexMagic, sizeof(kIndexMagic));
  idx_->write(&kIndexVersion, sizeof(kIndexVersion));
  idx_->write(&code, sizeof(code));
  idx_->write(&sequences, sizeof(sequences));
  idx_->write(&documents, sizeof(documents));
  idx_->write(lengths_.data(), lengths_.size() * sizeof(std::int32_t));

  // Pointers: byte offsets of each sequence, ptr[i+1] = ptr[i] + len[i] * itemsize.
  const auto itemsize = static_cast<std::int64_t>(dtype_size(dtype_));
  std::vector<std::int64_t> pointers(std::min<std::size_t>(kPointerChunk, lengths_.size()));
  std::int64_t offset = 0;
  for (std::size_t begin = 0; begin < lengths_.size(); begin += kPointerChunk) {
    const std::size_t count = std::min(kPointerChunk, lengths_.size() - begin);
    for (std::size_t i = 0; i < count; ++i) {
      pointers[i] = offset;
      offset += static_cast<std::int64_t>(lengths_[begin + i]) * itemsize;
    }
    idx_->write(pointers.data(), count * sizeof(std::int64_t));
  }
  idx_->write(document_indices_.data(), document_indices_.size() * sizeof(std::int64_t));

  // Both files on disk before either appears; .idx last, so a visible .idx means a whole pair.
  bin_->sync();
  idx_->sync();
  bin_->publish();
  try {
    idx_->publish();
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(data_path(prefix_), ignored);
    throw;
  }
  finalized_ = true;
}

}  // namespace megatron::data
