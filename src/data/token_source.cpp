// Indexed and mock token sources, the cached token id range and the vocabulary check (see
// token_source.h).
#include "megatron/data/token_source.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <system_error>

#include "megatron/core/check.h"
#include "megatron/data/md5.h"
#include "megatron/data/numpy_random.h"

namespace megatron::data {
namespace {

struct BinStamp {
  std::uint64_t bytes = 0;
  std::int64_t mtime_ns = 0;
};

BinStamp stamp_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {static_cast<std::uint64_t>(st.st_size),
          static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec};
}

std::string range_cache_path(const std::string& cache_dir, const std::string& prefix) {
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(prefix, error);
  const std::string key = error ? prefix : absolute.lexically_normal().string();
  return (std::filesystem::path(cache_dir) / (md5_hex(key) + "-token_id_range.json")).string();
}

std::optional<std::pair<std::int64_t, std::int64_t>> load_range(const std::string& path,
                                                                const BinStamp& stamp) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return std::nullopt;
  try {
    const nlohmann::json json = nlohmann::json::parse(read_text_file(path, "token id range"));
    if (json.at("bin_bytes").get<std::uint64_t>() != stamp.bytes ||
        json.at("bin_mtime_ns").get<std::int64_t>() != stamp.mtime_ns) {
      return std::nullopt;
    }
    return std::make_pair(json.at("min_token_id").get<std::int64_t>(),
                          json.at("max_token_id").get<std::int64_t>());
  } catch (const std::exception&) {
    return std::nullopt;  // unreadable or stale: scan again and rewrite
  }
}

void save_range(const std::string& path, const std::string& prefix, const BinStamp& stamp,
                std::pair<std::int64_t, std::int64_t> range) {
  try {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    const nlohmann::json json = {{"prefix", prefix},
                                 {"bin_bytes", stamp.bytes},
                                 {"bin_mtime_ns", stamp.mtime_ns},
                                 {"min_token_id", range.first},
                                 {"max_token_id", range.second}};
    const std::string text = json.dump(2) + "\n";
    AtomicFile file(path);
    file.write(text.data(), text.size());
    file.commit();
  } catch (const std::exception&) {
    // A read-only data folder only costs a rescan next time.
  }
}

template <typename T>
std::pair<std::int64_t, std::int64_t> scan_range(const std::uint8_t* bytes, std::size_t count) {
  if (count == 0) return {0, 0};
  T lo = std::numeric_limits<T>::max();
  T hi = std::numeric_limits<T>::lowest();
  for (std::size_t i = 0; i < count; ++i) {
    T value;
    std::memcpy(&value, bytes + i * sizeof(T), sizeof(T));
    lo = std::min(lo, value);
    hi = std::max(hi, value);
  }
  return {static_cast<std::int64_t>(lo), static_cast<std::int64_t>(hi)};
}

}  // namespace

std::int64_t TokenSource::num_tokens(std::int64_t begin, std::int64_t end) const {
  const UnalignedArray<std::int32_t> lengths = sequence_lengths();
  std::int64_t tokens = 0;
  for (std::int64_t s = begin; s < end; ++s) tokens += lengths[static_cast<std::size_t>(s)];
  return tokens;
}

std::int64_t IndexedTokenSource::num_tokens(std::int64_t begin, std::int64_t end) const {
  return static_cast<std::int64_t>(
      dataset_.num_tokens(static_cast<std::size_t>(begin), static_cast<std::size_t>(end)));
}

IndexedTokenSource::IndexedTokenSource(const std::string& prefix, std::string cache_dir)
    : dataset_(prefix), cache_dir_(std::move(cache_dir)) {}

void IndexedTokenSource::read(std::int64_t sequence, std::int64_t offset, std::int64_t length,
                              std::int64_t* out) const {
  MEGATRON_CHECK(sequence >= 0 && sequence < num_sequences(), prefix(), ": sequence ", sequence,
                 " does not exist (the dataset has ", num_sequences(),
                 "); the index cache does not belong to this dataset, delete it");
  const std::int64_t available = dataset_.sequence_lengths()[static_cast<std::size_t>(sequence)];
  MEGATRON_CHECK(offset >= 0 && length >= 0 && offset + length <= available, prefix(), ": tokens [",
                 offset, ", ", offset + length, ") of sequence ", sequence, " requested, it has ",
                 available, "; the index cache does not belong to this dataset, delete it");
  const std::uint8_t* bytes = dataset_.sequence_bytes(static_cast<std::size_t>(sequence)).data();
  visit_dtype(dataset_.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const std::uint8_t* src = bytes + static_cast<std::size_t>(offset) * sizeof(T);
    for (std::int64_t i = 0; i < length; ++i) {
      T value;
      std::memcpy(&value, src + static_cast<std::size_t>(i) * sizeof(T), sizeof(T));
      out[i] = static_cast<std::int64_t>(value);
    }
  });
}

std::pair<std::int64_t, std::int64_t> IndexedTokenSource::token_id_range() const {
  std::call_once(range_once_, [this] {
    const BinStamp stamp = stamp_of(data_path(prefix()));
    const std::string cache = cache_dir_.empty() ? "" : range_cache_path(cache_dir_, prefix());
    if (!cache.empty()) {
      if (const auto cached = load_range(cache, stamp)) {
        range_ = *cached;
        range_from_cache_ = true;
        return;
      }
    }
    const std::span<const std::uint8_t> bin = dataset_.bin_bytes();
    range_ = visit_dtype(dataset_.dtype(), [&](auto tag) {
      using T = decltype(tag);
      return scan_range<T>(bin.data(), bin.size() / sizeof(T));
    });
    if (!cache.empty()) save_range(cache, prefix(), stamp, range_);
  });
  return range_;
}

MockTokenSource::MockTokenSource(std::int64_t eod, std::uint64_t vocab_size)
    : lengths_(default_rng_integers_int32(0, 1, kMaxSequenceLength, kSize)),
      eod_(eod),
      vocab_size_(vocab_size) {
  MEGATRON_CHECK(vocab_size > 0, "mock data needs a tokenizer with a vocabulary");
}

void MockTokenSource::read(std::int64_t sequence, std::int64_t offset, std::int64_t length,
                           std::int64_t* out) const {
  MEGATRON_CHECK(sequence >= 0 && sequence < num_sequences(), "mock data: sequence ", sequence,
                 " does not exist");
  const std::int64_t size = lengths_[static_cast<std::size_t>(sequence)];
  MEGATRON_CHECK(offset >= 0 && length >= 0 && offset + length <= size, "mock data: tokens [",
                 offset, ", ", offset + length, ") of sequence ", sequence, " requested, it has ",
                 size);
  const auto vocab = static_cast<std::int64_t>(vocab_size_);
  for (std::int64_t i = 0; i < length; ++i) {
    const std::int64_t position = offset + i;
    out[i] = position == size - 1 ? eod_ : (position + 1) % vocab;
  }
}

std::pair<std::int64_t, std::int64_t> MockTokenSource::token_id_range() const {
  const std::int32_t longest = *std::max_element(lengths_.begin(), lengths_.end());
  const auto vocab = static_cast<std::int64_t>(vocab_size_);
  std::int64_t lo = eod_, hi = eod_;
  if (longest > 1) {
    // Ids 1..longest-1 (mod vocab): all of 0..vocab-1 once they wrap.
    lo = std::min<std::int64_t>(lo, longest - 1 >= vocab ? 0 : 1);
    hi = std::max<std::int64_t>(hi, std::min<std::int64_t>(longest - 1, vocab - 1));
  }
  return {lo, hi};
}

void check_token_ids_fit_vocab(const TokenSource& source, std::uint64_t vocab_size) {
  const auto [lo, hi] = source.token_id_range();
  const std::string name =
      source.prefix().empty() ? std::string("mock data") : "dataset " + source.prefix();
  MEGATRON_CHECK(lo >= 0, name, " holds the negative token id ", lo,
                 "; it was not made by preprocess_data for a tokenizer");
  MEGATRON_CHECK(static_cast<std::uint64_t>(hi) < vocab_size, name, " holds token id ", hi,
                 " but the tokenizer's vocabulary has only ", vocab_size, " ids (0..",
                 vocab_size - 1,
                 "); the data was tokenized with a different tokenizer: pass the matching "
                 "--tokenizer-type / --vocab-file, or re-run preprocess_data with this one");
}

}  // namespace megatron::data
