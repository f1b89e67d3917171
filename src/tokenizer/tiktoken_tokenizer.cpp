// Megatron's TikTokenizer (see tiktoken_tokenizer.h): the vocabulary loaded and checked as
// Megatron's reload_mergeable_ranks and CustomTikTokenizer do, and tiktoken's encode_ordinary:
// each piece of the pattern is one token if the vocabulary has it, else its bytes are merged
// pairwise, always the adjacent pair whose concatenation has the lowest rank (the leftmost of
// equals), until no concatenation is in the vocabulary.
#include "megatron/tokenizer/tiktoken_tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <fstream>
#include <limits>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "flat_hash.h"
#include "megatron/core/check.h"
#include "megatron/tokenizer/unicode.h"

namespace megatron::tokenizer {
namespace {

constexpr std::int32_t kNoRank = std::numeric_limits<std::int32_t>::max();

// Standard base64 (RFC 4648, '=' padding), as Python's base64.b64decode without validation would
// accept it from a well-formed file; anything else is refused.
bool decode_base64(std::string_view in, std::string& out) {
  static const std::array<std::int8_t, 256> table = [] {
    std::array<std::int8_t, 256> t{};
    t.fill(-1);
    const std::string_view alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (std::size_t i = 0; i < alphabet.size(); ++i) {
      t[static_cast<unsigned char>(alphabet[i])] = static_cast<std::int8_t>(i);
    }
    return t;
  }();
  out.clear();
  if (in.size() % 4 != 0) return false;
  std::uint32_t acc = 0;
  int bits = 0;
  std::size_t padding = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '=') {
      if (i + 2 < in.size()) return false;
      ++padding;
      continue;
    }
    if (padding > 0) return false;
    const std::int8_t v = table[static_cast<unsigned char>(in[i])];
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return padding <= 2;
}

using RankMap = StringMap<std::int32_t>;

class TiktokenTokenizer;

class TiktokenEncoder final : public Encoder {
 public:
  explicit TiktokenEncoder(const TiktokenTokenizer& tokenizer) : tokenizer_(tokenizer) {}
  void encode(std::string_view text, std::vector<std::int32_t>& out) override;

 private:
  void encode_piece(std::string_view piece, std::vector<std::int32_t>& out);
  const TiktokenTokenizer& tokenizer_;
  PieceCache cache_;
  std::vector<std::pair<std::size_t, std::int32_t>> parts_;  // (start byte, rank of this part + the next)
};

class TiktokenTokenizer final : public Tokenizer {
 public:
  TiktokenTokenizer(const TiktokenOptions& options, RankMap ranks, std::vector<std::string> tokens,
                    std::vector<std::string> specials)
      : pattern_(options.pattern),
        vocab_size_(static_cast<std::size_t>(options.vocab_size)),
        num_special_(static_cast<std::int32_t>(specials.size())),
        eod_(static_cast<std::int32_t>(std::find(specials.begin(), specials.end(), "</s>") - specials.begin())),
        ranks_(std::move(ranks)),
        tokens_(std::move(tokens)),
        specials_(std::move(specials)) {}

  std::string type() const override { return "TikTokenizer"; }
  std::size_t vocab_size() const override { return vocab_size_; }
  std::int32_t eod() const override { return eod_; }  // </s>
  std::optional<std::int32_t> bos() const override {  // <s>
    return static_cast<std::int32_t>(std::find(specials_.begin(), specials_.end(), "<s>") - specials_.begin());
  }
  std::unique_ptr<Encoder> make_encoder() const override { return std::make_unique<TiktokenEncoder>(*this); }

  std::string decode(std::span<const std::int32_t> ids) const override {
    std::string bytes;
    for (const std::int32_t id : ids) {
      MEGATRON_CHECK(id >= 0 && static_cast<std::size_t>(id) < vocab_size_, "TikTokenizer: token id ", id,
                     " is outside the vocabulary of ", vocab_size_);
      const auto index = static_cast<std::size_t>(id < num_special_ ? id : id - num_special_);
      bytes += id < num_special_ ? specials_[index] : tokens_[index];
    }
    return utf8_replace_invalid(bytes);
  }

  TiktokenPattern pattern() const { return pattern_; }
  // The id of a byte string, or kNoRank.
  std::int32_t rank(std::string_view bytes) const {
    const auto it = ranks_.find(bytes);
    return it == ranks_.end() ? kNoRank : it->second;
  }

 private:
  TiktokenPattern pattern_;
  std::size_t vocab_size_;
  std::int32_t num_special_;
  std::int32_t eod_;
  RankMap ranks_;                     // token bytes -> id (rank + the number of special tokens)
  std::vector<std::string> tokens_;   // id - num_special -> bytes
  std::vector<std::string> specials_;
};

void TiktokenEncoder::encode(std::string_view text, std::vector<std::int32_t>& out) {
  detail::split_tiktoken(text, tokenizer_.pattern(), [&](std::string_view piece) {
    cache_.encode_through(piece, out,
                          [&](std::string_view p, std::vector<std::int32_t>& ids) { encode_piece(p, ids); });
  });
}

void TiktokenEncoder::encode_piece(std::string_view piece, std::vector<std::int32_t>& out) {
  if (const std::int32_t whole = tokenizer_.rank(piece); whole != kNoRank) {
    out.push_back(whole);
    return;
  }
  // parts_[k] = (start of part k, rank of part k joined with part k + 1), with two sentinels.
  auto& parts = parts_;
  parts.clear();
  for (std::size_t i = 0; i + 1 < piece.size(); ++i) parts.emplace_back(i, tokenizer_.rank(piece.substr(i, 2)));
  parts.emplace_back(piece.size() - 1, kNoRank);
  parts.emplace_back(piece.size(), kNoRank);
  const auto joined_rank = [&](std::size_t k) {  // rank of parts k and k + 1 joined, after a merge
    if (k + 3 >= parts.size()) return kNoRank;
    return tokenizer_.rank(piece.substr(parts[k].first, parts[k + 3].first - parts[k].first));
  };
  for (;;) {
    std::size_t best = 0;
    std::int32_t best_rank = kNoRank;
    for (std::size_t k = 0; k + 1 < parts.size(); ++k) {
      if (parts[k].second < best_rank) {
        best_rank = parts[k].second;
        best = k;
      }
    }
    if (best_rank == kNoRank) break;
    if (best > 0) parts[best - 1].second = joined_rank(best - 1);
    parts[best].second = joined_rank(best);
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  for (std::size_t k = 0; k + 1 < parts.size(); ++k) {
    const std::int32_t id = tokenizer_.rank(piece.substr(parts[k].first, parts[k + 1].first - parts[k].first));
    MEGATRON_CHECK(id != kNoRank, "TikTokenizer: a byte of the text is not in the vocabulary");
    out.push_back(id);
  }
}

std::string describe_entry(const std::string& path, std::size_t index) {
  return path + ": entry " + std::to_string(index);
}

}  // namespace

TiktokenPattern parse_tiktoken_pattern(std::string_view name) {
  if (name == "v1") return TiktokenPattern::kV1;
  if (name == "v2") return TiktokenPattern::kV2;
  MEGATRON_FAIL("--tiktoken-pattern must be v1 or v2, got '", name, "'");
}

TiktokenOptions tiktoken_options(const TokenizerOptions& options) {
  MEGATRON_CHECK(!options.tiktoken_pattern.empty(), "--tokenizer-type TikTokenizer needs --tiktoken-pattern v1 or v2");
  TiktokenOptions tiktoken;
  tiktoken.path = options.tokenizer_model;
  tiktoken.pattern = parse_tiktoken_pattern(options.tiktoken_pattern);
  if (options.vocab_size > 0) tiktoken.vocab_size = options.vocab_size;
  tiktoken.num_special_tokens = options.tiktoken_num_special_tokens;
  tiktoken.special_tokens = options.tiktoken_special_tokens;
  return tiktoken;
}

std::string_view tiktoken_pattern_regex(TiktokenPattern pattern) {
  // Megatron's PATTERN_TIKTOKEN and PATTERN_TIKTOKEN_V2 (core_v0.12.0 tokenizer.py), as Python
  // holds them (the text between the quotes, escapes resolved).
  switch (pattern) {
    case TiktokenPattern::kV1:
      return R"([^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
    case TiktokenPattern::kV2:
      return R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|)"
             R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}|)"
             R"( ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  }
  return {};
}

namespace detail {

TiktokenVocabulary load_tiktoken_vocabulary(const TiktokenOptions& options) {
  const std::string& path = options.path;
  MEGATRON_CHECK(!path.empty(), "--tokenizer-type TikTokenizer needs --tokenizer-model (the vocabulary .json)");
  MEGATRON_CHECK(path.size() >= 5 && path.ends_with(".json"), "--tokenizer-model ", path,
                 ": a TikTokenizer vocabulary is a .json file (Megatron asserts the name ends in .json)");
  // Megatron's special tokens: the given list (which must hold <unk> <s> </s>) or those three,
  // then <SPECIAL_i> fillers up to --tiktoken-num-special-tokens.
  std::vector<std::string> specials = options.special_tokens;
  if (specials.empty()) specials = {"<unk>", "<s>", "</s>"};
  const std::set<std::string> unique(specials.begin(), specials.end());
  MEGATRON_CHECK(unique.size() == specials.size(), "--tiktoken-special-tokens lists a token twice");
  for (const char* required : {"<unk>", "<s>", "</s>"}) {
    MEGATRON_CHECK(unique.count(required) == 1, "--tiktoken-special-tokens must include <unk>, <s> and </s> (",
                   required, " is missing)");
  }
  const std::int64_t num_special = options.num_special_tokens;
  MEGATRON_CHECK(static_cast<std::int64_t>(specials.size()) <= num_special && num_special < options.vocab_size,
                 "--tiktoken-num-special-tokens ", num_special, " must be at least the ", specials.size(),
                 " special tokens and below --vocab-size ", options.vocab_size);
  MEGATRON_CHECK(options.vocab_size < (std::int64_t{1} << 31), "--vocab-size ", options.vocab_size, " is past 2^31");
  for (auto i = static_cast<std::int64_t>(specials.size()); i < num_special; ++i) {
    specials.push_back("<SPECIAL_" + std::to_string(i) + ">");
  }
  MEGATRON_CHECK(std::set<std::string>(specials.begin(), specials.end()).size() == specials.size(),
                 "--tiktoken-special-tokens collides with Megatron's <SPECIAL_i> fillers");

  std::ifstream in(path, std::ios::binary);
  MEGATRON_CHECK(in.good(), "--tokenizer-model ", path, ": cannot open the file");
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    MEGATRON_FAIL("--tokenizer-model ", path, ": not valid JSON (", e.what(), ")");
  }
  MEGATRON_CHECK(vocab.is_array(), "--tokenizer-model ", path, ": a TikTokenizer vocabulary is a JSON list");
  const std::size_t inner = static_cast<std::size_t>(options.vocab_size - num_special);
  MEGATRON_CHECK(vocab.size() >= inner, "--tokenizer-model ", path, " has ", vocab.size(), " tokens; --vocab-size ",
                 options.vocab_size, " less ", num_special, " special tokens needs ", inner,
                 " (Megatron requires every id below --vocab-size to be a token)");
  MEGATRON_CHECK(inner >= 256, "--vocab-size ", options.vocab_size, " less ", num_special, " special tokens keeps ", inner,
                 " tokens of ", path, ", fewer than its 256 single bytes, which every text needs (a byte outside them "
                 "cannot be encoded): give --vocab-size at least ", num_special + 256);
  std::unordered_set<std::string_view> seen;
  seen.reserve(inner);
  std::vector<std::string> tokens(inner);
  for (std::size_t i = 0; i < inner; ++i) {
    const nlohmann::json& entry = vocab[i];
    MEGATRON_CHECK(entry.is_object() && entry.size() == 3 && entry.contains("rank") && entry.contains("token_bytes") &&
                       entry.contains("token_str"),
                   describe_entry(path, i), ": needs exactly the keys rank, token_bytes and token_str");
    const nlohmann::json& rank = entry["rank"];
    MEGATRON_CHECK(rank.is_number_integer() && rank.get<std::int64_t>() == static_cast<std::int64_t>(i),
                   describe_entry(path, i), ": rank must be ", i, ", got ", entry["rank"].dump());
    const nlohmann::json& encoded = entry["token_bytes"];
    MEGATRON_CHECK(encoded.is_string() && decode_base64(encoded.get<std::string>(), tokens[i]),
                   describe_entry(path, i), ": token_bytes is not base64");
    MEGATRON_CHECK(i >= 256 || tokens[i] == std::string(1, static_cast<char>(i)), describe_entry(path, i),
                   ": the first 256 tokens must be the single bytes 0..255 in order");
    MEGATRON_CHECK(!tokens[i].empty(), describe_entry(path, i), ": an empty token");
    MEGATRON_CHECK(seen.insert(tokens[i]).second, describe_entry(path, i), ": the same bytes as an earlier token");
  }
  return {std::move(tokens), std::move(specials)};
}

}  // namespace detail

std::unique_ptr<Tokenizer> make_tiktoken_tokenizer(const TiktokenOptions& options) {
  detail::TiktokenVocabulary vocabulary = detail::load_tiktoken_vocabulary(options);
  const auto num_special = static_cast<std::int32_t>(vocabulary.specials.size());
  RankMap ranks;
  ranks.reserve(vocabulary.tokens.size());
  for (std::size_t i = 0; i < vocabulary.tokens.size(); ++i) {
    ranks.emplace(vocabulary.tokens[i], static_cast<std::int32_t>(i) + num_special);
  }
  return std::make_unique<TiktokenTokenizer>(options, std::move(ranks), std::move(vocabulary.tokens),
                                             std::move(vocabulary.specials));
}

}  // namespace megatron::tokenizer
