// GPT-2's pre-tokenizer as a hand-written scanner: the same pieces as the regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (alternatives tried in order at each position, leftmost-first), in one pass without
// backtracking. Input must be valid UTF-8 (checked; throws megatron::Error otherwise).
#pragma once

#include <cstddef>
#include <string_view>

#include "megatron/tokenizer/unicode.h"

namespace megatron::tokenizer {

[[noreturn]] void throw_invalid_utf8(std::string_view text, std::size_t pos);

namespace detail {

struct Cursor {
  std::string_view text;
  std::size_t pos = 0;

  // Class and byte length of the code point at `at` (at < text.size()).
  CharClass class_at(std::size_t at, std::size_t& len) const {
    const auto b = static_cast<unsigned char>(text[at]);
    if (b < 0x80) {
      len = 1;
      return ascii_class(b);
    }
    char32_t cp = 0;
    len = decode_utf8(text, at, cp);
    if (len == 0) throw_invalid_utf8(text, at);
    return char_class(cp);
  }

  static CharClass ascii_class(unsigned char b) {
    if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')) return CharClass::kLetter;
    if (b >= '0' && b <= '9') return CharClass::kNumber;
    if (b == ' ' || (b >= '\t' && b <= '\r')) return CharClass::kSpace;
    return CharClass::kOther;
  }

  // End of the run of code points of class `cls` starting at `at`.
  std::size_t run_end(std::size_t at, CharClass cls) const {
    std::size_t len = 0;
    while (at < text.size() && class_at(at, len) == cls) at += len;
    return at;
  }

  // Length of a contraction ('s 't 're 've 'm 'll 'd) at `at`, or 0.
  std::size_t contraction_at(std::size_t at) const {
    if (at + 1 >= text.size()) return 0;
    const char c1 = text[at + 1];
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (at + 2 >= text.size()) return 0;
    const char c2 = text[at + 2];
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    return 0;
  }

  // Byte length of the next piece starting at pos (pos < text.size()).
  std::size_t next_piece() const {
    const std::size_t start = pos;
    std::size_t len = 0;
    const CharClass cls = class_at(start, len);
    if (text[start] == '\'') {
      if (const std::size_t n = contraction_at(start)) return n;
    }
    if (cls != CharClass::kSpace) return run_end(start + len, cls) - start;
    // A single U+0020 joins the letter / number / other run that follows it.
    if (text[start] == ' ' && start + 1 < text.size()) {
      std::size_t next_len = 0;
      const CharClass next = class_at(start + 1, next_len);
      if (next != CharClass::kSpace) return run_end(start + 1 + next_len, next) - start;
    }
    // \s+(?!\S): the whitespace run, minus its last code point when a non-space follows (that
    // code point then starts the next piece); a lone whitespace before a non-space is \s+.
    std::size_t end = start + len;
    std::size_t last = start;
    while (end < text.size()) {
      std::size_t n = 0;
      if (class_at(end, n) != CharClass::kSpace) break;
      last = end;
      end += n;
    }
    if (end == text.size() || last == start) return end - start;
    return last - start;
  }
};

}  // namespace detail

// Calls fn(std::string_view piece) for each piece of `text`, in order; the pieces concatenate to
// `text`.
template <typename Fn>
void pretokenize(std::string_view text, Fn&& fn) {
  detail::Cursor cursor{text, 0};
  while (cursor.pos < text.size()) {
    const std::size_t n = cursor.next_piece();
    fn(text.substr(cursor.pos, n));
    cursor.pos += n;
  }
}

}  // namespace megatron::tokenizer
