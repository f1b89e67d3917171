// The Unicode data of the `tokenizers` library, which is older than ICU's (each from another Rust
// crate): its Punctuation pre-tokenizer reads general categories as of Unicode 8.0, StripAccents
// the combining marks of Unicode 9.0, its normalizers (NFC, NFD, NFKC, NFKD) the decompositions
// of Unicode 11.0. Derived from ICU by each code point's age (the version that assigned it) and
// the four code points whose category changed since; test_hf_tokenizer checks every code point
// against the library.
#include <unicode/uchar.h>

#include "hf_components.h"

namespace megatron::tokenizer::hf {
namespace {

// Whether the code point was assigned by Unicode major.minor.
bool assigned_by(char32_t cp, int major, int minor) {
  UVersionInfo age;
  u_charAge(static_cast<UChar32>(cp), age);
  if (age[0] == 0 && age[1] == 0) return false;  // unassigned
  return age[0] < major || (age[0] == major && age[1] <= minor);
}

std::uint32_t category_mask(char32_t cp) { return U_GET_GC_MASK(static_cast<UChar32>(cp)); }

}  // namespace

bool library_punctuation(char32_t cp) {
  if (cp < 0x80) {  // Rust's is_ascii_punctuation: ASCII symbols too
    return (cp >= '!' && cp <= '/') || (cp >= ':' && cp <= '@') || (cp >= '[' && cp <= '`') || (cp >= '{' && cp <= '~');
  }
  if (cp == 0x166D || cp == 0x111C9) return true;  // Po in Unicode 8.0 (So and Mn since)
  return assigned_by(cp, 8, 0) && (category_mask(cp) & U_GC_P_MASK) != 0;
}

bool library_mark(char32_t cp) {
  if (cp == 0x1CF2 || cp == 0x1CF3) return true;  // Mc in Unicode 9.0 (Lo since)
  if (cp == 0x111C9) return false;                // Po in Unicode 9.0 (Mn since)
  return assigned_by(cp, 9, 0) && (category_mask(cp) & U_GC_M_MASK) != 0;
}

bool library_normalizes(char32_t cp) { return cp < 0x80 || assigned_by(cp, 11, 0); }

}  // namespace megatron::tokenizer::hf
