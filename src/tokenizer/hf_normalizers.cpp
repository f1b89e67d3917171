// tokenizer.json normalizers (see hf_components.h): Sequence, NFC, NFD, NFKC, NFKD, Lowercase,
// Strip, StripAccents, Prepend and Replace, as the `tokenizers` library applies them. Unicode
// normalization and case mapping are ICU's, normalization and StripAccents limited to the
// library's Unicode versions (hf_unicode_data.cpp).
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>

#include "hf_components.h"
#include "hf_regex.h"
#include "megatron/core/check.h"
#include "megatron/tokenizer/pretokenizer.h"
#include "megatron/tokenizer/unicode.h"

namespace megatron::tokenizer::hf {
namespace {

bool is_ascii(std::string_view s) {
  for (const char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

// Calls fn(code point, byte offset, byte length) for each code point of valid UTF-8 `s`.
template <typename Fn>
void for_each_code_point(std::string_view s, Fn&& fn) {
  for (std::size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const std::size_t n = decode_utf8(s, i, cp);
    if (n == 0) throw_invalid_utf8(s, i);
    fn(cp, i, n);
    i += n;
  }
}

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(std::string& text, std::size_t& origin) const override {
    for (const auto& p : parts_) p->normalize(text, origin);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

class UnicodeForm final : public Normalizer {
 public:
  UnicodeForm(const std::string& form, const std::string& where) {
    UErrorCode status = U_ZERO_ERROR;
    if (form == "NFC") normalizer_ = icu::Normalizer2::getNFCInstance(status);
    if (form == "NFD") normalizer_ = icu::Normalizer2::getNFDInstance(status);
    if (form == "NFKC") normalizer_ = icu::Normalizer2::getNFKCInstance(status);
    if (form == "NFKD") normalizer_ = icu::Normalizer2::getNFKDInstance(status);
    MEGATRON_CHECK(normalizer_ != nullptr && U_SUCCESS(status), where, ": ICU has no ", form, " normalizer");
  }
  void normalize(std::string& text, std::size_t& origin) const override {
    if (is_ascii(text)) return;  // ASCII is its own normal form under all four
    const std::string out = normalized(text);
    if (origin > 0) {  // composition can join the first character with the next: end on a boundary
      origin = std::min(normalized(text.substr(0, origin)).size(), out.size());
      while (origin < out.size() && (static_cast<unsigned char>(out[origin]) & 0xC0) == 0x80) ++origin;
    }
    text = out;
  }

 private:
  // The library's normal form: ICU's, with each code point its Unicode version does not know left
  // as it is and ending the stretch before it (to the library, an unassigned code point).
  std::string normalized(const std::string& text) const {
    std::string result, stretch;
    for_each_code_point(text, [&](char32_t cp, std::size_t at, std::size_t n) {
      if (library_normalizes(cp)) {
        stretch.append(text, at, n);
        return;
      }
      result += icu_normalized(stretch);
      stretch.clear();
      result.append(text, at, n);
    });
    return result + icu_normalized(stretch);
  }

  std::string icu_normalized(const std::string& text) const {
    if (text.empty()) return text;
    UErrorCode status = U_ZERO_ERROR;
    const icu::UnicodeString in = icu::UnicodeString::fromUTF8(text);
    if (normalizer_->isNormalized(in, status) && U_SUCCESS(status)) return text;
    status = U_ZERO_ERROR;
    const icu::UnicodeString out = normalizer_->normalize(in, status);
    MEGATRON_CHECK(U_SUCCESS(status), "Unicode normalization failed: ", u_errorName(status));
    std::string result;
    out.toUTF8String(result);
    return result;
  }

  const icu::Normalizer2* normalizer_ = nullptr;
};

// Each code point's full lower-case mapping on its own (Rust's char::to_lowercase: no context,
// so a word-final capital sigma becomes σ, not ς).
class Lowercase final : public Normalizer {
 public:
  void normalize(std::string& text, std::size_t& origin) const override {
    std::string out;
    out.reserve(text.size());
    std::size_t new_origin = 0;
    for_each_code_point(text, [&](char32_t cp, std::size_t at, std::size_t n) {
      if (cp < 0x80) {
        out += static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
        if (at < origin) new_origin = out.size();
        return;
      }
      UChar in[2];
      int32_t in_len = 0;
      U16_APPEND_UNSAFE(in, in_len, static_cast<UChar32>(cp));
      UChar lowered[8];
      UErrorCode status = U_ZERO_ERROR;
      const int32_t len = u_strToLower(lowered, 8, in, in_len, "", &status);
      if (U_FAILURE(status)) {
        out.append(text, at, n);
        if (at < origin) new_origin = out.size();
        return;
      }
      for (int32_t i = 0; i < len;) {
        UChar32 c;
        U16_NEXT(lowered, i, len, c);
        append_utf8(out, static_cast<char32_t>(c));
      }
      if (at < origin) new_origin = out.size();
    });
    origin = new_origin;
    text = std::move(out);
  }
};

class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text, std::size_t& origin) const override {
    std::size_t begin = 0, end = 0;
    bool seen = false;
    for_each_code_point(text, [&](char32_t cp, std::size_t at, std::size_t n) {
      if (code_point_flags(cp) & flags::kSpace) return;
      if (!seen) begin = at;
      seen = true;
      end = at + n;
    });
    if (!seen) {
      if (left_ || right_) text.clear();
      origin = 0;
      return;
    }
    const std::size_t first = left_ ? begin : 0, last = right_ ? end : text.size();
    origin = origin > first ? std::min(origin, last) - first : 0;
    text = text.substr(first, last - first);
  }

 private:
  bool left_, right_;
};

class StripAccents final : public Normalizer {
 public:
  void normalize(std::string& text, std::size_t& origin) const override {
    std::string out;
    std::size_t kept_in_origin = 0;
    for_each_code_point(text, [&](char32_t cp, std::size_t at, std::size_t n) {
      if (library_mark(cp)) return;
      out.append(text, at, n);
      if (at < origin) kept_in_origin += n;
    });
    origin = kept_in_origin;
    text = std::move(out);
  }
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text, std::size_t& origin) const override {
    if (text.empty()) return;
    text.insert(0, prefix_);
    if (origin > 0) origin += prefix_.size();
  }

 private:
  std::string prefix_;
};

class Replace final : public Normalizer {
 public:
  Replace(const std::string& pattern, std::string content, const std::string& where)
      : regex_(pattern, where), content_(std::move(content)) {}
  // The bytes copied from before `origin` and the replacements of matches that start there
  // make the new origin (the library aligns a replacement with the start of its match).
  void normalize(std::string& text, std::size_t& origin) const override {
    std::string out;
    std::size_t last = 0, new_origin = 0;
    bool replaced = false;
    regex_.for_each_match(text, [&](std::size_t begin, std::size_t end) {
      out.append(text, last, begin - last);
      if (last < origin) new_origin += std::min(begin, origin) - last;
      if (begin < origin) new_origin += content_.size();
      out += content_;
      last = end;
      replaced = true;
    });
    if (!replaced) return;
    if (last < origin) new_origin += origin - last;
    out.append(text, last, std::string::npos);
    origin = new_origin;
    text = std::move(out);
  }

 private:
  Regex regex_;
  std::string content_;
};

}  // namespace

std::string pattern_regex(const json& pattern, const std::string& where) {
  MEGATRON_CHECK(pattern.is_object() && pattern.size() == 1, where,
                 ".pattern must be {\"String\": ...} or {\"Regex\": ...}");
  if (pattern.contains("String")) return escape_regex(pattern.at("String").get<std::string>());
  MEGATRON_CHECK(pattern.contains("Regex"), where, ".pattern must be {\"String\": ...} or {\"Regex\": ...}");
  return pattern.at("Regex").get<std::string>();
}

std::unique_ptr<Normalizer> parse_normalizer(const json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  MEGATRON_CHECK(j.is_object() && j.contains("type"), where, " is not a normalizer object");
  const std::string type = j.at("type").get<std::string>();
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> parts;
    const json& list = j.at("normalizers");
    for (std::size_t i = 0; i < list.size(); ++i) {
      parts.push_back(parse_normalizer(list[i], where + ".normalizers[" + std::to_string(i) + "]"));
    }
    return std::make_unique<Sequence>(std::move(parts));
  }
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    return std::make_unique<UnicodeForm>(type, where);
  }
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Strip") return std::make_unique<Strip>(j.value("strip_left", true), j.value("strip_right", true));
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Prepend") return std::make_unique<Prepend>(j.at("prepend").get<std::string>());
  if (type == "Replace") {
    return std::make_unique<Replace>(pattern_regex(j.at("pattern"), where), j.at("content").get<std::string>(),
                                     where);
  }
  MEGATRON_FAIL(where, " is a ", type, " normalizer, which this build does not implement (implemented: Sequence, "
                "NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Prepend, Replace)");
}

}  // namespace megatron::tokenizer::hf
