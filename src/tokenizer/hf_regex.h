// Private to the tokenizer module: the regular expressions of HuggingFace tokenizer.json files
// (Split pre-tokenizers, Replace normalizers and decoders), run by PCRE2, JIT-compiled.
//
// The `tokenizers` library runs them with Oniguruma, whose Unicode classes differ from PCRE2's in
// a few places; the pattern is rewritten so PCRE2 matches what Oniguruma matches:
//   \s  also U+0085 (Oniguruma: 9-D, U+0085 and Z*; PCRE2: 9-D and Z*); \S its complement,
//   \w  letters, marks, decimal digits and connector punctuation (PCRE2 has letters, all numbers
//       and '_'); \W its complement,
//   ^ $ line anchors, as they always are in Oniguruma (PCRE2_MULTILINE).
// \S and \W inside a bracket class keep PCRE2's meaning (no such pattern is known to differ).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace megatron::tokenizer::hf {

class Regex {
 public:
  // Compiles `pattern`; throws megatron::Error naming `where` (file and JSON path) and the
  // position PCRE2 reports.
  Regex(std::string_view pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // The leftmost match at or after `from` in `text` (valid UTF-8): true and [begin, end), or
  // false. Thread-safe (each thread has its own match data and JIT stack).
  bool find(std::string_view text, std::size_t from, std::size_t& begin, std::size_t& end) const;

  // Calls fn(begin, end) for each non-overlapping match, left to right; an empty match moves the
  // search one code point on (as Oniguruma's iterator does).
  template <typename Fn>
  void for_each_match(std::string_view text, Fn&& fn) const {
    std::size_t from = 0, begin = 0, end = 0;
    while (from <= text.size() && find(text, from, begin, end)) {
      fn(begin, end);
      if (end > begin) {
        from = end;
      } else {
        from = end + 1;
        while (from < text.size() && (static_cast<unsigned char>(text[from]) & 0xC0) == 0x80) ++from;
      }
    }
  }

  // Oniguruma's class escapes as PCRE2 spells them (see the header comment); exposed for tests.
  static std::string rewrite_for_pcre2(std::string_view pattern);

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
};

// The regex that matches `literal` exactly (Split's {"String": ...} patterns).
std::string escape_regex(std::string_view literal);

}  // namespace megatron::tokenizer::hf
