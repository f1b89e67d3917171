// Open-addressing hash tables for the tokenizer's hot paths (private to the tokenizer module):
// FlatU64Map maps 64-bit keys (BPE pairs) to small values; PieceCache maps byte strings (pieces)
// to token-id lists in arenas. Linear probing, power-of-two capacity, load factor <= 1/2.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace megatron::tokenizer {

inline std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 32;
  x *= 0xD6E8FEB86659FD93ULL;
  x ^= x >> 32;
  return x;
}

template <typename V>
class FlatU64Map {
 public:
  static constexpr std::uint64_t kEmpty = ~0ULL;

  void reserve(std::size_t n) {
    std::size_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    if (cap > keys_.size()) rehash(cap);
  }

  void insert_or_assign(std::uint64_t key, V value) {
    if (2 * (size_ + 1) > keys_.size()) rehash(keys_.empty() ? 16 : keys_.size() * 2);
    std::size_t i = mix64(key) & (keys_.size() - 1);
    while (keys_[i] != kEmpty && keys_[i] != key) i = (i + 1) & (keys_.size() - 1);
    if (keys_[i] == kEmpty) ++size_;
    keys_[i] = key;
    values_[i] = value;
  }

  const V* find(std::uint64_t key) const {
    if (keys_.empty()) return nullptr;
    std::size_t i = mix64(key) & (keys_.size() - 1);
    while (true) {
      const std::uint64_t k = keys_[i];
      if (k == key) return &values_[i];
      if (k == kEmpty) return nullptr;
      i = (i + 1) & (keys_.size() - 1);
    }
  }

  std::size_t size() const { return size_; }

 private:
  void rehash(std::size_t cap) {
    std::vector<std::uint64_t> old_keys(cap, kEmpty);
    std::vector<V> old_values(cap);
    old_keys.swap(keys_);
    old_values.swap(values_);
    size_ = 0;
    for (std::size_t i = 0; i < old_keys.size(); ++i) {
      if (old_keys[i] != kEmpty) insert_or_assign(old_keys[i], old_values[i]);
    }
  }

  std::vector<std::uint64_t> keys_;
  std::vector<V> values_;
  std::size_t size_ = 0;
};

// A map from strings that also finds std::string_view keys without a copy.
struct StringViewHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringViewHash, std::equal_to<>>;

inline std::uint64_t hash_bytes(std::string_view s) {
  std::uint64_t h = 0x9E3779B97F4A7C15ULL ^ s.size();
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = mix64(h ^ w) + i;
  }
  std::uint64_t tail = 0;
  std::memcpy(&tail, s.data() + i, s.size() - i);
  return mix64(h ^ tail ^ (tail << 7));
}

// Piece bytes -> token ids, bounded: when full it is cleared and refilled (the working set of a
// corpus refills it within a few thousand lines).
class PieceCache {
 public:
  explicit PieceCache(std::size_t capacity_log2 = 18)
      : slots_(std::size_t{1} << capacity_log2), max_entries_(slots_.size() / 2) {}

  // Ids of `piece`, or nullptr; `count` receives their number.
  const std::int32_t* find(std::string_view piece, std::uint64_t hash, std::size_t& count) const {
    std::size_t i = hash & (slots_.size() - 1);
    while (true) {
      const Slot& s = slots_[i];
      if (s.key_len == 0) return nullptr;
      if (s.hash == hash && s.key_len == piece.size() &&
          std::memcmp(keys_.data() + s.key_offset, piece.data(), piece.size()) == 0) {
        count = s.ids_len;
        return ids_.data() + s.ids_offset;
      }
      i = (i + 1) & (slots_.size() - 1);
    }
  }

  void insert(std::string_view piece, std::uint64_t hash, const std::int32_t* ids,
              std::size_t count) {
    if (piece.empty()) return;
    if (entries_ >= max_entries_) clear();
    std::size_t i = hash & (slots_.size() - 1);
    while (slots_[i].key_len != 0) i = (i + 1) & (slots_.size() - 1);
    Slot& s = slots_[i];
    s.hash = hash;
    s.key_offset = static_cast<std::uint32_t>(keys_.size());
    s.key_len = static_cast<std::uint32_t>(piece.size());
    s.ids_offset = static_cast<std::uint32_t>(ids_.size());
    s.ids_len = static_cast<std::uint32_t>(count);
    keys_.insert(keys_.end(), piece.begin(), piece.end());
    ids_.insert(ids_.end(), ids, ids + count);
    ++entries_;
  }

  // Appends the ids of `piece` to `out`: the cached ones, or encode(piece, out)'s, which are then
  // cached. Pieces longer than kMaxCachedPiece bytes bypass the cache (they rarely repeat).
  static constexpr std::size_t kMaxCachedPiece = 64;
  template <typename Encode>
  void encode_through(std::string_view piece, std::vector<std::int32_t>& out, Encode&& encode) {
    if (piece.size() > kMaxCachedPiece) {
      encode(piece, out);
      return;
    }
    const std::uint64_t hash = hash_bytes(piece);
    std::size_t count = 0;
    if (const std::int32_t* ids = find(piece, hash, count)) {
      out.insert(out.end(), ids, ids + count);
      return;
    }
    const std::size_t before = out.size();
    encode(piece, out);
    insert(piece, hash, out.data() + before, out.size() - before);
  }

 private:
  struct Slot {
    std::uint64_t hash = 0;
    std::uint32_t key_offset = 0;
    std::uint32_t key_len = 0;  // 0 = empty slot
    std::uint32_t ids_offset = 0;
    std::uint32_t ids_len = 0;
  };

  void clear() {
    std::fill(slots_.begin(), slots_.end(), Slot{});
    keys_.clear();
    ids_.clear();
    entries_ = 0;
  }

  std::vector<Slot> slots_;
  std::vector<char> keys_;
  std::vector<std::int32_t> ids_;
  std::size_t entries_ = 0;
  std::size_t max_entries_;
};

}  // namespace megatron::tokenizer
