// The BPE model of a tokenizer.json (see hf_components.h), as the `tokenizers` library runs it:
// a piece starts as one symbol per character (per byte after a ByteLevel pre-tokenizer), unknown
// characters become their <0xXX> byte tokens (byte_fallback) or the unk token (fused when
// fuse_unk); then the adjacent pair with the lowest merge rank is merged, the leftmost of equal
// ranks, from a priority queue whose stale entries are skipped exactly as the library skips them;
// with ignore_merges a piece that is itself a token is that token.
#include <algorithm>
#include <cstdio>
#include <queue>

#include "flat_hash.h"
#include "hf_components.h"
#include "megatron/core/check.h"
#include "megatron/tokenizer/gpt2_bpe_tokenizer.h"
#include "megatron/tokenizer/pretokenizer.h"
#include "megatron/tokenizer/unicode.h"

namespace megatron::tokenizer::hf {
namespace {

using Vocab = StringMap<std::int32_t>;

std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
}

std::string optional_string(const json& j, const char* key) {
  return j.contains(key) && j.at(key).is_string() ? j.at(key).get<std::string>() : std::string();
}

// tokenizer.json's merges ("left right" strings, or [left, right] pairs in newer files) as pair ->
// rank << 32 | merged id; `prefix`: the continuing-subword prefix the right token drops when merged.
void read_merges(const json& merges, const Vocab& vocab, const std::string& prefix, const std::string& where,
                 FlatU64Map<std::uint64_t>& out) {
  out.reserve(merges.size());
  std::uint32_t rank = 0;
  for (std::size_t i = 0; i < merges.size(); ++i) {
    std::string left, right;
    const json& m = merges[i];
    if (m.is_string()) {
      const std::string line = m.get<std::string>();
      if (line.rfind("#version", 0) == 0) continue;
      const std::size_t space = line.find(' ');
      MEGATRON_CHECK(space != std::string::npos && line.find(' ', space + 1) == std::string::npos, where,
                     ".merges[", i, "] \"", line, "\" is not two tokens separated by one space");
      left = line.substr(0, space);
      right = line.substr(space + 1);
    } else {
      MEGATRON_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(), where, ".merges[", i,
                     "] is not a pair of tokens");
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    }
    std::string merged = left;
    merged.append(right, std::min(prefix.size(), right.size()), std::string::npos);
    const auto a = vocab.find(left), b = vocab.find(right), c = vocab.find(merged);
    MEGATRON_CHECK(a != vocab.end() && b != vocab.end() && c != vocab.end(), where, ".merges[", i, "] (",
                   left, " + ", right, "): \"", a == vocab.end() ? left : b == vocab.end() ? right : merged,
                   "\" is not in the vocabulary");
    out.insert_or_assign(pair_key(a->second, b->second),
                         (static_cast<std::uint64_t>(rank) << 32) | static_cast<std::uint32_t>(c->second));
    ++rank;
  }
}

}  // namespace

struct BpeModel::Tables {
  Vocab vocab;                     // as the file spells tokens
  Vocab byte_vocab;                // byte-level mode: tokens as raw bytes
  std::array<std::int32_t, 256> byte_id{};      // byte-level mode: the token of each single byte
  std::array<std::int32_t, 256> fallback_id{};  // <0xXX>
  FlatU64Map<std::uint64_t> merges;             // pair -> rank << 32 | new id
  std::int32_t unk = -1;
  bool byte_level = false, byte_fallback = false, fuse_unk = false, ignore_merges = false;
  std::string prefix, suffix;  // continuing_subword_prefix, end_of_word_suffix
};

BpeModel::BpeModel(const json& j, bool byte_level, const std::string& where) : tables_(std::make_unique<Tables>()) {
  Tables& t = *tables_;
  t.byte_level = byte_level;
  MEGATRON_CHECK(j.contains("vocab") && j.at("vocab").is_object(), where, ".vocab must be an object of token: id");
  MEGATRON_CHECK(j.contains("merges") && j.at("merges").is_array(), where, ".merges must be a list");
  const json dropout = j.value("dropout", json());
  MEGATRON_CHECK(dropout.is_null() || dropout.get<double>() == 0.0, where, ".dropout is ", dropout.dump(),
                 ": BPE dropout (random merges) is for training a tokenizer, not implemented");
  t.byte_fallback = j.value("byte_fallback", false);
  t.fuse_unk = j.value("fuse_unk", false);
  t.ignore_merges = j.value("ignore_merges", false);
  t.prefix = optional_string(j, "continuing_subword_prefix");
  t.suffix = optional_string(j, "end_of_word_suffix");
  MEGATRON_CHECK(!byte_level || (t.prefix.empty() && t.suffix.empty()), where,
                 ": continuing_subword_prefix / end_of_word_suffix with a ByteLevel pre-tokenizer is not implemented");

  std::int32_t max_id = -1;
  for (const auto& [token, id_json] : j.at("vocab").items()) {
    MEGATRON_CHECK(id_json.is_number_unsigned(), where, ".vocab[\"", token, "\"] is not a non-negative id");
    const auto id = id_json.get<std::int64_t>();
    MEGATRON_CHECK(id < (std::int64_t{1} << 31), where, ".vocab[\"", token, "\"] = ", id, " is too large");
    t.vocab[token] = static_cast<std::int32_t>(id);
    max_id = std::max(max_id, static_cast<std::int32_t>(id));
  }
  vocab_size_ = t.vocab.size();
  tokens_.assign(static_cast<std::size_t>(max_id + 1), std::string());
  for (const auto& [token, id] : t.vocab) tokens_[id] = token;

  const std::string unk = optional_string(j, "unk_token");
  if (!unk.empty()) {
    const auto it = t.vocab.find(unk);
    MEGATRON_CHECK(it != t.vocab.end(), where, ".unk_token \"", unk, "\" is not in the vocabulary");
    t.unk = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    const auto it = t.vocab.find(std::string_view(name));
    t.fallback_id[b] = it == t.vocab.end() ? -1 : it->second;
  }
  if (byte_level) {
    t.byte_id.fill(-1);
    std::string bytes;
    for (const auto& [token, id] : t.vocab) {
      if (!gpt2_alphabet_to_bytes(token, bytes)) continue;  // never produced from bytes
      t.byte_vocab[bytes] = id;
      if (bytes.size() == 1) t.byte_id[static_cast<unsigned char>(bytes[0])] = id;
    }
  }

  read_merges(j.at("merges"), t.vocab, t.prefix, where, t.merges);
}

BpeModel::~BpeModel() = default;

std::int32_t BpeModel::id(std::string_view token) const {
  const auto it = tables_->vocab.find(token);
  return it == tables_->vocab.end() ? -1 : it->second;
}

void BpeModel::encode(std::string_view piece, std::vector<std::int32_t>& out) const {
  if (piece.empty()) return;
  if (tables_->ignore_merges) {
    const Vocab& whole = tables_->byte_level ? tables_->byte_vocab : tables_->vocab;
    const auto it = whole.find(piece);
    if (it != whole.end()) {
      out.push_back(it->second);
      return;
    }
  }
  merge_word(piece, out);
}

struct BpeModel::Symbol {
  std::int32_t id;
  std::int32_t prev, next;
  bool alive;
};

void BpeModel::merge_word(std::string_view piece, std::vector<std::int32_t>& out) const {
  std::vector<Symbol> symbols;
  initial_symbols(piece, symbols);
  if (symbols.empty()) return;
  apply_merges(symbols);
  for (const Symbol& s : symbols) {
    if (s.alive) out.push_back(s.id);
  }
}

void BpeModel::initial_symbols(std::string_view piece, std::vector<Symbol>& symbols) const {
  const Tables& t = *tables_;
  symbols.reserve(piece.size());
  const auto add = [&](std::int32_t id) {
    const auto n = static_cast<std::int32_t>(symbols.size());
    symbols.push_back({id, n - 1, n + 1, true});
  };
  // Unknown characters: their byte tokens, else the unk token (one per run when fused); a pending
  // unk is written before the next known character, as the library orders them.
  std::int32_t pending_unk = -1;
  const auto unknown = [&](std::string_view s) {
    if (t.byte_fallback && std::all_of(s.begin(), s.end(), [&](char c) { return t.fallback_id[static_cast<unsigned char>(c)] >= 0; })) {
      for (const char c : s) add(t.fallback_id[static_cast<unsigned char>(c)]);
      return;
    }
    if (t.unk < 0) return;  // no unk token: the character is dropped
    if (pending_unk >= 0 && !t.fuse_unk) add(pending_unk);
    pending_unk = t.unk;
  };
  const auto known = [&](std::int32_t id) {
    if (pending_unk >= 0) add(pending_unk);
    pending_unk = -1;
    add(id);
  };
  if (t.byte_level) {
    static const auto table = gpt2_byte_to_unicode();
    for (const char c : piece) {
      const auto b = static_cast<unsigned char>(c);
      if (t.byte_id[b] >= 0) {
        known(t.byte_id[b]);
      } else {
        std::string spelled;
        append_utf8(spelled, table[b]);
        unknown(spelled);
      }
    }
  } else {
    std::string s;
    for (std::size_t i = 0; i < piece.size();) {
      char32_t cp = 0;
      const std::size_t n = decode_utf8(piece, i, cp);
      if (n == 0) throw_invalid_utf8(piece, i);
      s.assign(piece.substr(i, n));
      if (i > 0 && !t.prefix.empty()) s.insert(0, t.prefix);
      if (i + n == piece.size() && !t.suffix.empty()) s += t.suffix;
      const auto it = t.vocab.find(s);
      if (it != t.vocab.end()) {
        known(it->second);
      } else {
        unknown(s);
      }
      i += n;
    }
  }
  if (pending_unk >= 0) add(pending_unk);
  if (symbols.empty()) return;
  symbols.back().next = -1;
}

void BpeModel::apply_merges(std::vector<Symbol>& symbols) const {
  const Tables& t = *tables_;
  struct Merge {
    std::int32_t pos;
    std::uint32_t rank;
    std::int32_t new_id;
    bool operator<(const Merge& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Merge> queue;
  const auto push = [&](std::int32_t pos) {
    const Symbol& left = symbols[pos];
    if (left.next < 0) return;
    if (const std::uint64_t* m = t.merges.find(pair_key(left.id, symbols[left.next].id))) {
      queue.push({pos, static_cast<std::uint32_t>(*m >> 32), static_cast<std::int32_t>(*m & 0xFFFFFFFFu)});
    }
  };
  for (std::int32_t i = 0; i + 1 < static_cast<std::int32_t>(symbols.size()); ++i) push(i);
  while (!queue.empty()) {
    const Merge top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    const Symbol right = symbols[left.next];
    const std::uint64_t* m = t.merges.find(pair_key(left.id, right.id));
    if (m == nullptr || static_cast<std::int32_t>(*m & 0xFFFFFFFFu) != top.new_id) continue;  // stale entry
    left.id = top.new_id;
    symbols[left.next].alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) push(left.prev);
    push(top.pos);
  }
}

}  // namespace megatron::tokenizer::hf
