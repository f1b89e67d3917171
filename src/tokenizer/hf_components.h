// Private to the tokenizer module: the parts of a HuggingFace tokenizer.json pipeline, each read
// from its JSON object and doing what the `tokenizers` library (Rust, 0.23) does with it:
//   added tokens  found in the raw text (and, for "normalized" ones, in the normalized text);
//   normalizer    rewrites the text between them;
//   pre-tokenizer splits that text into pieces;
//   model (BPE)   turns each piece into ids;
//   post-processor adds the template's special tokens (BOS/EOS);
//   decoder       turns tokens back into text.
// Anything a file asks for that is not implemented is refused naming the file, the JSON path and
// the component type. `where` arguments are such names, e.g. "tokenizer.json: pre_tokenizer".
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace megatron::tokenizer::hf {

using nlohmann::json;

// A stretch of text on its way through the pipeline. `origin`: how many of its leading bytes come
// from the first character of the text given to encode (0 when it starts later): the library
// tracks where each normalized byte came from, and Metaspace's prepend_scheme "first" prepends
// only to pieces that start at the original text's first byte, which NFKC's "1⁄2" from "½" all
// do.
struct Piece {
  std::string text;
  std::size_t origin = 0;
};

// Unicode \w as the Rust regex crate has it (Alphabetic, marks, decimal digits, connector
// punctuation, Join_Control): single_word added tokens and the Whitespace pre-tokenizer.
bool is_word_char(char32_t cp);

// The regex of a {"String": literal} or {"Regex": pattern} object.
std::string pattern_regex(const json& pattern, const std::string& where);

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // `origin` as in Piece, updated to the normalized text.
  virtual void normalize(std::string& text, std::size_t& origin) const = 0;
  void normalize(std::string& text) const {
    std::size_t origin = 0;
    normalize(text, origin);
  }
};
// nullptr for a JSON null.
std::unique_ptr<Normalizer> parse_normalizer(const json& j, const std::string& where);

// The `tokenizers` library's Unicode data where it is older than ICU's (hf_unicode_data.cpp):
// punctuation as of Unicode 8.0 (the Punctuation pre-tokenizer), combining marks as of 9.0
// (StripAccents),
// and whether normalization knows the code point (assigned by Unicode 11.0; a newer one is left as
// it is, as an unassigned one).
bool library_punctuation(char32_t cp);
bool library_mark(char32_t cp);
bool library_normalizes(char32_t cp);

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits every piece further (dropping empty pieces).
  virtual void split(std::vector<Piece>& pieces) const = 0;
  // True for the ByteLevel pre-tokenizer: the model then works on bytes (its vocabulary spelled
  // in GPT-2's byte alphabet), and nothing may come after it.
  virtual bool byte_level() const { return false; }
};
std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const json& j, const std::string& where);

// A Metaspace pre-tokenizer's or decoder's settings, checked as the library checks them: the
// replacement one character; add_prefix_space false only with prepend_scheme never (absent: always).
struct MetaspaceSettings {
  std::string replacement;
  std::string prepend_scheme;  // always, first or never
};
MetaspaceSettings parse_metaspace(const json& j, const std::string& where);

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Adds the special tokens around ids[begin, end) of a single sequence.
  virtual void process(std::vector<std::int32_t>& ids, std::size_t begin) const = 0;
};
// nullptr for a JSON null or a processor that leaves ids alone (ByteLevel).
std::unique_ptr<PostProcessor> parse_post_processor(const json& j, const std::string& where);

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};
std::unique_ptr<Decoder> parse_decoder(const json& j, const std::string& where);

// The "model" object of type BPE.
class BpeModel {
 public:
  BpeModel(const json& j, bool byte_level, const std::string& where);
  ~BpeModel();
  // Appends the ids of one pre-tokenized piece. In byte-level mode `piece` is raw bytes.
  void encode(std::string_view piece, std::vector<std::int32_t>& out) const;
  std::size_t size() const { return vocab_size_; }
  // The token string of every id below the largest (empty where none), as the file spells it.
  const std::vector<std::string>& tokens() const { return tokens_; }
  std::int32_t id(std::string_view token) const;  // -1: not a token of the model

 private:
  struct Tables;
  struct Symbol;  // a token of the word being merged, in a doubly linked list
  void merge_word(std::string_view piece, std::vector<std::int32_t>& out) const;
  // The piece's characters (or bytes) as vocabulary ids, unknown ones as byte tokens or unk.
  void initial_symbols(std::string_view piece, std::vector<Symbol>& symbols) const;
  // The merges applied lowest rank first (leftmost among equals), as the library does.
  void apply_merges(std::vector<Symbol>& symbols) const;
  std::unique_ptr<Tables> tables_;
  std::vector<std::string> tokens_;
  std::size_t vocab_size_ = 0;
};

// "added_tokens": found in the text before the model sees it, leftmost-longest, with their
// single_word / lstrip / rstrip / normalized rules.
struct AddedToken {
  std::int32_t id = 0;
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = false, special = false;
};

class AddedTokenMatcher {
 public:
  // `tokens` all have the same `normalized` flag; `contents` the strings to look for (the
  // normalized form of normalized tokens).
  AddedTokenMatcher(std::vector<AddedToken> tokens, std::vector<std::string> contents);
  ~AddedTokenMatcher();
  bool empty() const { return tokens_.empty(); }
  // Splits `text` into stretches: (id, text) for a token found, (-1, text) between them; the
  // stretches' bytes cover `text` in order (lstrip/rstrip take the spaces next to a token).
  void split(std::string_view text, std::vector<std::pair<std::int32_t, std::string_view>>& out) const;

 private:
  struct Trie;
  std::vector<AddedToken> tokens_;
  std::unique_ptr<Trie> trie_;
};

}  // namespace megatron::tokenizer::hf
