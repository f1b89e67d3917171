// UTF-8 helpers and the Unicode character classes the pre-tokenizers need. The classes come
// from ICU (general category L* / N*, the White_Space property), flattened once into a table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace megatron::tokenizer {

enum class CharClass : std::uint8_t {
  kLetter = 0,  // \p{L}
  kNumber = 1,  // \p{N}
  kSpace = 2,   // \s (White_Space)
  kOther = 3,   // everything else
};

// Class of a code point (0..0x10FFFF); the table is built on first use and is thread-safe.
CharClass char_class(char32_t cp);

// The Unicode properties the TikTokenizer patterns test, as bit flags of a code point (ICU's
// general categories and White_Space; a second table, built on first use).
namespace flags {
inline constexpr std::uint8_t kLetter = 1;     // \p{L}
inline constexpr std::uint8_t kNumber = 2;     // \p{N}
inline constexpr std::uint8_t kSpace = 4;      // \s (White_Space)
inline constexpr std::uint8_t kUpper = 8;      // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
inline constexpr std::uint8_t kLower = 16;     // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
inline constexpr std::uint8_t kLineBreak = 32;  // \r or \n
}  // namespace flags
std::uint8_t code_point_flags(char32_t cp);

// Decodes the code point starting at `s[pos]`; returns its byte length, or 0 when the bytes there
// are not well-formed UTF-8 (overlong forms, surrogates and values past U+10FFFF included).
std::size_t decode_utf8(std::string_view s, std::size_t pos, char32_t& cp);

// Byte offset of the first ill-formed sequence, or std::string_view::npos when `s` is valid.
std::size_t find_invalid_utf8(std::string_view s);

void append_utf8(std::string& out, char32_t cp);

// Python's bytes.decode("utf-8", errors="replace"): each maximal ill-formed subpart becomes one
// U+FFFD.
std::string utf8_replace_invalid(std::string_view bytes);

}  // namespace megatron::tokenizer
