// The TikTokenizer patterns as hand-written scanners (see tiktoken_tokenizer.h). Each returns the
// end of the regex's match at a position: the first alternative that matches, with greedy
// quantifiers backtracking exactly as a backtracking engine (tiktoken's fancy-regex) would:
//   v1: [^\r\n\p{L}\p{N}]?+\p{L}+ | \p{N} | ' '?[^\s\p{L}\p{N}]++[\r\n]* | \s*[\r\n] | \s+(?!\S) | \s+
//   v2: P?U*L+ | P?U+L* | \p{N} | ' '?[^\s\p{L}\p{N}]+[\r\n/]* | \s*[\r\n]+ | \s+(?!\S) | \s+
// with P = [^\r\n\p{L}\p{N}], U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], L = [\p{Ll}\p{Lm}\p{Lo}\p{M}].
// The text is decoded once into code points with their property flags; the scanners index them.
// Written by hand because the patterns are fixed and a scanner is several times faster than a
// general regex engine; tests compare it with tiktoken itself.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "megatron/tokenizer/pretokenizer.h"
#include "megatron/tokenizer/tiktoken_tokenizer.h"
#include "megatron/tokenizer/unicode.h"

namespace megatron::tokenizer::detail {
namespace {

struct CodePoints {
  std::vector<std::size_t> offset;  // byte offset of each code point, then the text's size
  std::vector<std::uint8_t> flag;
  std::vector<char32_t> cp;
  std::size_t size() const { return flag.size(); }
};

void decode(std::string_view text, CodePoints& out) {
  out.offset.clear();
  out.flag.clear();
  out.cp.clear();
  std::size_t pos = 0;
  while (pos < text.size()) {
    char32_t c = 0;
    const std::size_t len = decode_utf8(text, pos, c);
    if (len == 0) throw_invalid_utf8(text, pos);
    out.offset.push_back(pos);
    out.flag.push_back(code_point_flags(c));
    out.cp.push_back(c);
    pos += len;
  }
  out.offset.push_back(text.size());
}

class Scanner {
 public:
  explicit Scanner(const CodePoints& c) : c_(c), n_(c.size()) {}

  bool is(std::size_t i, std::uint8_t f) const { return i < n_ && (c_.flag[i] & f) != 0; }
  // [^\r\n\p{L}\p{N}]
  bool prefix(std::size_t i) const {
    return i < n_ && (c_.flag[i] & (flags::kLetter | flags::kNumber | flags::kLineBreak)) == 0;
  }
  // [^\s\p{L}\p{N}]
  bool other(std::size_t i) const {
    return i < n_ && (c_.flag[i] & (flags::kLetter | flags::kNumber | flags::kSpace)) == 0;
  }
  std::size_t run(std::size_t i, std::uint8_t f) const {
    while (is(i, f)) ++i;
    return i;
  }

  // ' '?[^\s\p{L}\p{N}]+ then the characters `tail` accepts; 0 if it does not match at i.
  template <typename Tail>
  std::size_t punctuation(std::size_t i, Tail tail) const {
    std::size_t j = i;
    if (c_.cp[i] == U' ' && other(i + 1)) j = i + 1;
    if (!other(j)) return 0;
    while (other(j)) ++j;
    while (j < n_ && tail(j)) ++j;
    return j;
  }

  // The whitespace alternatives at i (a whitespace code point): \s*[\r\n] / \s*[\r\n]+ end after
  // the run's last line break; else \s+(?!\S) leaves the run's last code point to the next piece
  // when a non-space follows; else \s+.
  std::size_t whitespace(std::size_t i) const {
    const std::size_t end = run(i, flags::kSpace);
    for (std::size_t k = end; k > i; --k) {
      if (is(k - 1, flags::kLineBreak)) return k;
    }
    if (end == n_ || end - i < 2) return end;
    return end - 1;
  }

  // U*L+ from s (backtracking U* one code point at a time until L+ matches); 0 if it cannot.
  std::size_t upper_then_lower(std::size_t s) const {
    const std::size_t u = run(s, flags::kUpper);
    for (std::size_t k = u + 1; k-- > s;) {
      if (is(k, flags::kLower)) return run(k, flags::kLower);
    }
    return 0;
  }
  // U+L* from s; 0 if no U at s.
  std::size_t upper_run_then_lower(std::size_t s) const {
    if (!is(s, flags::kUpper)) return 0;
    return run(run(s, flags::kUpper), flags::kLower);
  }

  std::size_t next_v1(std::size_t i) const {
    // [^\r\n\p{L}\p{N}]?+\p{L}+ (the prefix, once taken, is not given back)
    const std::size_t s = prefix(i) ? i + 1 : i;
    if (is(s, flags::kLetter)) return run(s, flags::kLetter);
    if (is(i, flags::kNumber)) return i + 1;
    if (const std::size_t e = punctuation(i, [&](std::size_t j) { return is(j, flags::kLineBreak); })) return e;
    return whitespace(i);
  }

  std::size_t next_v2(std::size_t i) const {
    const bool p = prefix(i);
    if (p) {
      if (const std::size_t e = upper_then_lower(i + 1)) return e;
    }
    if (const std::size_t e = upper_then_lower(i)) return e;
    if (p) {
      if (const std::size_t e = upper_run_then_lower(i + 1)) return e;
    }
    if (const std::size_t e = upper_run_then_lower(i)) return e;
    if (is(i, flags::kNumber)) return i + 1;
    const auto tail = [&](std::size_t j) { return is(j, flags::kLineBreak) || c_.cp[j] == U'/'; };
    if (const std::size_t e = punctuation(i, tail)) return e;
    return whitespace(i);
  }

 private:
  const CodePoints& c_;
  std::size_t n_;
};

}  // namespace

void split_tiktoken(std::string_view text, TiktokenPattern pattern, const std::function<void(std::string_view)>& fn) {
  thread_local CodePoints points;
  decode(text, points);
  const Scanner scanner(points);
  std::size_t i = 0;
  while (i < points.size()) {
    const std::size_t end = pattern == TiktokenPattern::kV1 ? scanner.next_v1(i) : scanner.next_v2(i);
    fn(text.substr(points.offset[i], points.offset[end] - points.offset[i]));
    i = end;
  }
}

}  // namespace megatron::tokenizer::detail
