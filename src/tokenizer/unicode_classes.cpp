// Character classes from ICU and UTF-8 decoding (see unicode.h). Each table holds one byte per
// code point (1.1 MB), built in a few milliseconds on first use.
#include <unicode/uchar.h>

#include <memory>
#include <mutex>
#include <vector>

#include "megatron/tokenizer/unicode.h"

namespace megatron::tokenizer {
namespace {

constexpr char32_t kMaxCodePoint = 0x10FFFF;

// Every property the pre-tokenizers test, queried from ICU once per code point.
std::vector<std::uint8_t> build_flag_table() {
  constexpr std::uint32_t kUpperMask = U_GC_LU_MASK | U_GC_LT_MASK | U_GC_LM_MASK | U_GC_LO_MASK | U_GC_M_MASK;
  constexpr std::uint32_t kLowerMask = U_GC_LL_MASK | U_GC_LM_MASK | U_GC_LO_MASK | U_GC_M_MASK;
  std::vector<std::uint8_t> table(kMaxCodePoint + 1, 0);
  for (char32_t cp = 0; cp <= kMaxCodePoint; ++cp) {
    const auto c = static_cast<UChar32>(cp);
    const std::uint32_t mask = U_GET_GC_MASK(c);
    std::uint8_t f = 0;
    if (mask & U_GC_L_MASK) f |= flags::kLetter;
    if (mask & U_GC_N_MASK) f |= flags::kNumber;
    if (u_hasBinaryProperty(c, UCHAR_WHITE_SPACE)) f |= flags::kSpace;
    if (mask & kUpperMask) f |= flags::kUpper;
    if (mask & kLowerMask) f |= flags::kLower;
    if (cp == U'\r' || cp == U'\n') f |= flags::kLineBreak;
    table[cp] = f;
  }
  return table;
}

const std::vector<std::uint8_t>& flag_table() {
  static const std::vector<std::uint8_t> table = build_flag_table();
  return table;
}

// GPT-2's classes, read off the flags (a letter or number is never White_Space).
std::vector<CharClass> build_class_table() {
  const std::vector<std::uint8_t>& flags_of = flag_table();
  std::vector<CharClass> table(kMaxCodePoint + 1, CharClass::kOther);
  for (char32_t cp = 0; cp <= kMaxCodePoint; ++cp) {
    const std::uint8_t f = flags_of[cp];
    if (f & flags::kLetter) {
      table[cp] = CharClass::kLetter;
    } else if (f & flags::kNumber) {
      table[cp] = CharClass::kNumber;
    } else if (f & flags::kSpace) {
      table[cp] = CharClass::kSpace;
    }
  }
  return table;
}

const std::vector<CharClass>& class_table() {
  static const std::vector<CharClass> table = build_class_table();
  return table;
}

}  // namespace

CharClass char_class(char32_t cp) {
  return cp <= kMaxCodePoint ? class_table()[cp] : CharClass::kOther;
}

std::uint8_t code_point_flags(char32_t cp) { return cp <= kMaxCodePoint ? flag_table()[cp] : 0; }

std::size_t decode_utf8(std::string_view s, std::size_t pos, char32_t& cp) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + pos;
  const std::size_t left = s.size() - pos;
  const unsigned char b0 = p[0];
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  auto cont = [&](std::size_t i) { return i < left && (p[i] & 0xC0) == 0x80; };
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    if (!cont(1)) return 0;
    cp = (char32_t(b0 & 0x1F) << 6) | (p[1] & 0x3F);
    return 2;
  }
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (b0 == 0xE0 && p[1] < 0xA0) return 0;   // overlong
    if (b0 == 0xED && p[1] >= 0xA0) return 0;  // surrogate
    cp = (char32_t(b0 & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    return 3;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (b0 == 0xF0 && p[1] < 0x90) return 0;   // overlong
    if (b0 == 0xF4 && p[1] >= 0x90) return 0;  // past U+10FFFF
    cp = (char32_t(b0 & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) |
         (char32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
    return 4;
  }
  return 0;
}

std::size_t find_invalid_utf8(std::string_view s) {
  std::size_t pos = 0;
  char32_t cp = 0;
  while (pos < s.size()) {
    if (static_cast<unsigned char>(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const std::size_t n = decode_utf8(s, pos, cp);
    if (n == 0) return pos;
    pos += n;
  }
  return std::string_view::npos;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

namespace {

// Length of the maximal subpart of an ill-formed sequence at p (Unicode 3.9, "U+FFFD
// substitution of maximal subparts", which Python's decoder follows): the longest prefix of a
// well-formed sequence, at least one byte.
std::size_t maximal_subpart(const unsigned char* p, std::size_t left) {
  const unsigned char b0 = p[0];
  unsigned char lo = 0x80, hi = 0xBF;
  std::size_t need = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 1;
  }
  std::size_t n = 1;
  if (n < left && p[n] >= lo && p[n] <= hi) {
    ++n;
    while (n <= need && n < left && (p[n] & 0xC0) == 0x80) ++n;
  }
  return n;
}

}  // namespace

std::string utf8_replace_invalid(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t pos = 0;
  char32_t cp = 0;
  while (pos < bytes.size()) {
    const std::size_t n = decode_utf8(bytes, pos, cp);
    if (n > 0) {
      out.append(bytes.substr(pos, n));
      pos += n;
    } else {
      out += "\xEF\xBF\xBD";
      pos += maximal_subpart(reinterpret_cast<const unsigned char*>(bytes.data()) + pos,
                             bytes.size() - pos);
    }
  }
  return out;
}

}  // namespace megatron::tokenizer
