// GPT-2 byte-level BPE: loading, merges, decode (see gpt2_bpe_tokenizer.h). The cached encoder
// lives in gpt2_bpe_encoder.cpp.
#include "megatron/tokenizer/gpt2_bpe_tokenizer.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <nlohmann/json.hpp>
#include <queue>

#include "megatron/core/check.h"
#include "megatron/core/file_io.h"
#include "megatron/tokenizer/unicode.h"
#include "flat_hash.h"

namespace megatron::tokenizer {

std::array<char32_t, 256> gpt2_byte_to_unicode() {
  std::array<char32_t, 256> table{};
  char32_t next_extra = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    table[b] = printable ? static_cast<char32_t>(b) : next_extra++;
  }
  return table;
}

bool gpt2_alphabet_to_bytes(std::string_view token, std::string& bytes) {
  static const std::array<int, 0x144> inverse = [] {
    std::array<int, 0x144> t;
    t.fill(-1);
    const auto forward = gpt2_byte_to_unicode();
    for (int b = 0; b < 256; ++b) t[forward[b]] = b;
    return t;
  }();
  bytes.clear();
  std::size_t pos = 0;
  char32_t cp = 0;
  while (pos < token.size()) {
    const std::size_t n = decode_utf8(token, pos, cp);
    if (n == 0 || cp >= inverse.size() || inverse[cp] < 0) return false;
    bytes += static_cast<char>(inverse[cp]);
    pos += n;
  }
  return true;
}

struct Gpt2BpeTokenizer::MergeTable {
  struct Value {
    std::int32_t rank;
    std::int32_t result;
  };
  FlatU64Map<Value> map;
};

namespace {

std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
         static_cast<std::uint32_t>(right);
}

}  // namespace

Gpt2BpeTokenizer::~Gpt2BpeTokenizer() = default;

std::unique_ptr<Gpt2BpeTokenizer> Gpt2BpeTokenizer::from_files(const std::string& vocab_file,
                                                               const std::string& merge_file) {
  const std::string vocab = read_text_file(vocab_file, "--vocab-file");
  const std::string merges = read_text_file(merge_file, "--merge-file");
  return std::make_unique<Gpt2BpeTokenizer>(vocab, merges, vocab_file, merge_file);
}

std::int32_t Gpt2BpeTokenizer::intern_symbol(const std::string& bytes) {
  auto [it, inserted] = symbol_ids_.try_emplace(bytes, static_cast<std::int32_t>(symbol_bytes_.size()));
  if (inserted) symbol_bytes_.push_back(bytes);
  return it->second;
}

Gpt2BpeTokenizer::Gpt2BpeTokenizer(std::string_view vocab_json, std::string_view merges_text,
                                   const std::string& vocab_origin,
                                   const std::string& merges_origin)
    : merges_(std::make_unique<MergeTable>()) {

  // vocab.json: {"token in GPT-2's alphabet": id, ...}
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(vocab_json);
  } catch (const nlohmann::json::exception& e) {
    MEGATRON_FAIL(vocab_origin, ": not a valid vocab.json (", e.what(), ")");
  }
  MEGATRON_CHECK(vocab.is_object() && !vocab.empty(), vocab_origin,
                 ": expected a JSON object mapping tokens to ids");
  std::int64_t max_id = -1;
  for (const auto& [token, id] : vocab.items()) {
    MEGATRON_CHECK(id.is_number_integer() && id.get<std::int64_t>() >= 0 &&
                       id.get<std::int64_t>() < INT32_MAX / 2,
                   vocab_origin, ": token ", nlohmann::json(token).dump(),
                   " has an id that is not a non-negative integer");
    max_id = std::max(max_id, id.get<std::int64_t>());
  }
  vocab_size_ = vocab.size();
  num_vocab_ids_ = static_cast<std::int32_t>(max_id + 1);
  symbol_bytes_.assign(static_cast<std::size_t>(num_vocab_ids_), std::string());
  std::vector<bool> assigned(static_cast<std::size_t>(num_vocab_ids_), false);
  std::string bytes;
  for (const auto& [token, id] : vocab.items()) {
    MEGATRON_CHECK(gpt2_alphabet_to_bytes(token, bytes), vocab_origin, ": token ",
                   nlohmann::json(token).dump(), " has characters outside GPT-2's byte alphabet");
    const auto index = id.get<std::int32_t>();
    symbol_bytes_[static_cast<std::size_t>(index)] = bytes;
    assigned[static_cast<std::size_t>(index)] = true;
    symbol_ids_[bytes] = index;
  }
  const auto eot = vocab.find(kEndOfText);
  MEGATRON_CHECK(eot != vocab.end(), vocab_origin, ": no \"", kEndOfText,
                 "\" entry; GPT2BPETokenizer needs it as the end-of-document token");
  eod_ = eot->get<std::int32_t>();
  is_vocab_id_ = std::move(assigned);  // a sparse vocabulary leaves some ids unused
  for (int b = 0; b < 256; ++b) byte_symbol_[b] = intern_symbol(std::string(1, static_cast<char>(b)));

  // merges.txt: drop the first line (the "#version" header) and the text after the last
  // newline; each remaining line is two tokens; the rank is the line's position.
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (true) {
    const std::size_t nl = merges_text.find('\n', start);
    if (nl == std::string_view::npos) break;
    lines.push_back(merges_text.substr(start, nl - start));
    start = nl + 1;
  }
  // `lines` now excludes the part after the final newline (empty for a well-formed file).
  MEGATRON_CHECK(!lines.empty(), merges_origin, ": empty merges file");
  merges_->map.reserve(lines.size());
  std::string left_bytes, right_bytes;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    std::vector<std::string_view> parts;
    std::size_t pos = 0;
    while (pos < line.size()) {
      while (pos < line.size() && std::isspace(static_cast<unsigned char>(line[pos]))) ++pos;
      const std::size_t begin = pos;
      while (pos < line.size() && !std::isspace(static_cast<unsigned char>(line[pos]))) ++pos;
      if (pos > begin) parts.push_back(line.substr(begin, pos - begin));
    }
    MEGATRON_CHECK(parts.size() == 2, merges_origin, ":", i + 1,
                   ": expected two tokens separated by a space, found ", parts.size());
    MEGATRON_CHECK(gpt2_alphabet_to_bytes(parts[0], left_bytes) &&
                       gpt2_alphabet_to_bytes(parts[1], right_bytes),
                   merges_origin, ":", i + 1, ": characters outside GPT-2's byte alphabet");
    const std::int32_t left = intern_symbol(left_bytes);
    const std::int32_t right = intern_symbol(right_bytes);
    const std::int32_t result = intern_symbol(left_bytes + right_bytes);
    // A repeated pair keeps its last rank, as a dict built from the list would.
    merges_->map.insert_or_assign(pair_key(left, right),
                                  {static_cast<std::int32_t>(i - 1), result});
  }
  num_merges_ = lines.size() - 1;
}

std::int32_t Gpt2BpeTokenizer::merge_rank(std::int32_t left, std::int32_t right,
                                          std::int32_t& result) const {
  const MergeTable::Value* v = merges_->map.find(pair_key(left, right));
  if (v == nullptr) return INT32_MAX;
  result = v->result;
  return v->rank;
}

void Gpt2BpeTokenizer::emit(std::int32_t symbol, std::string_view piece,
                            std::vector<std::int32_t>& out) const {
  if (symbol >= num_vocab_ids_ || !is_vocab_id_[static_cast<std::size_t>(symbol)]) {
    MEGATRON_FAIL("BPE produced a token that is not in the vocabulary (",
                  symbol_bytes_[static_cast<std::size_t>(symbol)].size(), " bytes, from piece of ",
                  piece.size(), " bytes); the vocab and merges files do not belong together");
  }
  out.push_back(symbol);
}

void Gpt2BpeTokenizer::bpe(std::string_view piece, std::vector<std::int32_t>& out) const {
  if (piece.size() <= 48) {
    bpe_small(piece, out);
  } else if (piece.size() <= kMaxHeapPiece) {
    bpe_heap(piece, out);
  } else {
    bpe_low_memory(piece, out);
  }
}

void Gpt2BpeTokenizer::bpe_reference(std::string_view piece, std::vector<std::int32_t>& out) const {
  std::vector<std::int32_t> word;
  for (unsigned char b : piece) word.push_back(byte_symbol_[b]);
  while (word.size() > 1) {
    std::int32_t best_rank = INT32_MAX, left = -1, right = -1, merged = -1;
    for (std::size_t i = 0; i + 1 < word.size(); ++i) {
      std::int32_t result = -1;
      const std::int32_t rank = merge_rank(word[i], word[i + 1], result);
      if (rank < best_rank) {
        best_rank = rank;
        left = word[i];
        right = word[i + 1];
        merged = result;
      }
    }
    if (best_rank == INT32_MAX) break;
    std::vector<std::int32_t> next;
    for (std::size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == left && word[i + 1] == right) {
        next.push_back(merged);
        i += 2;
      } else {
        next.push_back(word[i++]);
      }
    }
    word.swap(next);
  }
  for (std::int32_t s : word) emit(s, piece, out);
}

void Gpt2BpeTokenizer::bpe_small(std::string_view piece, std::vector<std::int32_t>& out) const {
  std::int32_t word[48];
  std::int32_t rank[48];    // rank[i]: rank of (word[i], word[i+1])
  std::int32_t result[48];  // result[i]: the merged symbol for that pair
  std::size_t m = piece.size();
  for (std::size_t i = 0; i < m; ++i) word[i] = byte_symbol_[static_cast<unsigned char>(piece[i])];
  for (std::size_t i = 0; i + 1 < m; ++i) rank[i] = merge_rank(word[i], word[i + 1], result[i]);
  while (m > 1) {
    std::size_t best = 0;
    for (std::size_t i = 1; i + 1 < m; ++i) {
      if (rank[i] < rank[best]) best = i;
    }
    const std::int32_t best_rank = rank[best];
    if (best_rank == INT32_MAX) break;
    // Merge every occurrence of the pair, left to right; earlier positions hold none.
    const std::int32_t left = word[best], right = word[best + 1], merged = result[best];
    std::size_t w = best;
    for (std::size_t i = best; i < m;) {
      if (i + 1 < m && word[i] == left && word[i + 1] == right) {
        word[w++] = merged;
        i += 2;
      } else {
        word[w++] = word[i++];
      }
    }
    m = w;
    const std::size_t from = best > 0 ? best - 1 : 0;
    for (std::size_t i = from; i + 1 < m; ++i) rank[i] = merge_rank(word[i], word[i + 1], result[i]);
  }
  for (std::size_t i = 0; i < m; ++i) emit(word[i], piece, out);
}

void Gpt2BpeTokenizer::bpe_heap(std::string_view piece, std::vector<std::int32_t>& out) const {
  const std::size_t n = piece.size();
  std::vector<std::int32_t> sym(n), rank(n, INT32_MAX), result(n, -1);
  std::vector<std::int64_t> prev(n), next(n);
  for (std::size_t i = 0; i < n; ++i) {
    sym[i] = byte_symbol_[static_cast<unsigned char>(piece[i])];
    prev[i] = static_cast<std::int64_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<std::int64_t>(i + 1) : -1;
  }
  using Entry = std::pair<std::int32_t, std::int64_t>;  // (rank, position), smallest first
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  auto refresh = [&](std::int64_t i) {
    if (i < 0) return;
    const std::int64_t j = next[static_cast<std::size_t>(i)];
    auto& r = rank[static_cast<std::size_t>(i)];
    r = j < 0 ? INT32_MAX
              : merge_rank(sym[static_cast<std::size_t>(i)], sym[static_cast<std::size_t>(j)],
                           result[static_cast<std::size_t>(i)]);
    if (r != INT32_MAX) heap.emplace(r, i);
  };
  for (std::size_t i = 0; i + 1 < n; ++i) refresh(static_cast<std::int64_t>(i));
  std::vector<bool> alive(n, true);
  std::vector<std::int64_t> batch;
  while (!heap.empty()) {
    // One round: every live occurrence of the lowest-rank pair, in position order. Pairs made
    // by this round's merges never have this rank, so they wait for later rounds.
    const std::int32_t r = heap.top().first;
    batch.clear();
    while (!heap.empty() && heap.top().first == r) {
      batch.push_back(heap.top().second);
      heap.pop();
    }
    for (const std::int64_t p : batch) {
      const auto i = static_cast<std::size_t>(p);
      if (!alive[i] || rank[i] != r) continue;
      const auto j = static_cast<std::size_t>(next[i]);
      sym[i] = result[i];
      alive[j] = false;
      next[i] = next[j];
      if (next[j] >= 0) prev[static_cast<std::size_t>(next[j])] = p;
      refresh(p);
      refresh(prev[i]);
    }
  }
  for (std::int64_t i = 0; i >= 0; i = next[static_cast<std::size_t>(i)]) {
    emit(sym[static_cast<std::size_t>(i)], piece, out);
  }
}

std::int32_t Gpt2BpeTokenizer::token_id(std::string_view token_bytes) const {
  const auto it = symbol_ids_.find(std::string(token_bytes));
  if (it == symbol_ids_.end() || it->second >= num_vocab_ids_) return -1;
  return it->second;
}

const std::string& Gpt2BpeTokenizer::token_bytes(std::int32_t id) const {
  MEGATRON_CHECK(id >= 0 && id < num_vocab_ids_ && is_vocab_id_[static_cast<std::size_t>(id)],
                 "token id ", id, " is outside the vocabulary (", vocab_size_, " tokens)");
  return symbol_bytes_[static_cast<std::size_t>(id)];
}

std::string Gpt2BpeTokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string bytes;
  for (const std::int32_t id : ids) bytes += token_bytes(id);
  return utf8_replace_invalid(bytes);
}

}  // namespace megatron::tokenizer
