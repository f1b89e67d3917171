// Strict parser for one jsonl line that extracts the text of selected top-level keys: a string,
// or a list of strings (one sentence each). Accepts exactly what Python's json.loads accepts
// (NaN / Infinity literals included), except lone surrogate escapes inside the extracted texts,
// which Megatron's tokenizer could not encode either (elsewhere in the line they are accepted).
// Strings without escapes are returned as views into the line.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace megatron::data {

class JsonDocumentParser {
 public:
  explicit JsonDocumentParser(std::vector<std::string> keys);

  // Parses `line`. On failure returns false and `error` holds the reason, e.g.
  // "invalid JSON (unterminated string starting at column 9)" or "no \"text\" key".
  bool parse(std::string_view line, std::string& error);

  // After a successful parse: the sentences of key k (one for a string value). Views stay valid
  // until the next parse() and while `line` lives.
  std::span<const std::string_view> sentences(std::size_t key) const { return views_[key]; }
  std::size_t num_keys() const { return keys_.size(); }

 private:
  struct Piece {
    bool in_arena;
    std::size_t offset;
    std::size_t size;
  };
  struct Failure {
    std::string message;
  };

  void skip_ws();
  [[noreturn]] void fail_at(std::size_t pos, const std::string& what) const;
  void parse_value(int depth, std::vector<Piece>* capture, bool capture_list, std::string_view key);
  void parse_object_members(int depth);
  Piece parse_string(bool text);  // text: a value we tokenize (stricter)
  // The \uXXXX escape at `esc` (a surrogate pair as one character) appended to the arena.
  void unicode_escape(std::size_t esc, bool text);
  void lone_surrogate(std::size_t esc, bool text) const;
  void parse_number();
  void expect_literal(std::string_view word);

  std::vector<std::string> keys_;
  std::string_view line_;
  std::size_t pos_ = 0;
  std::string arena_;
  std::vector<std::vector<Piece>> pieces_;
  std::vector<bool> seen_;
  std::vector<std::string> type_errors_;  // per key: why its last value is not text ("" if it is)
  std::vector<std::vector<std::string_view>> views_;
};

}  // namespace megatron::data
