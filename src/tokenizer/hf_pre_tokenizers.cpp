// tokenizer.json pre-tokenizers (see hf_components.h): Sequence, Split, ByteLevel, Metaspace,
// Digits, Whitespace, WhitespaceSplit and Punctuation, splitting as the `tokenizers` library does
// (its five delimiter behaviours included). ByteLevel's GPT-2 regex runs through the hand-written
// scanner of pretokenizer.h, which matches it exactly; the byte alphabet is applied by the model.

#include <algorithm>

#include "hf_components.h"
#include "hf_regex.h"
#include "megatron/core/check.h"
#include "megatron/tokenizer/pretokenizer.h"
#include "megatron/tokenizer/unicode.h"

namespace megatron::tokenizer::hf {
namespace {

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior parse_behavior(const json& j, const std::string& where) {
  const std::string name = j.get<std::string>();
  if (name == "Removed") return Behavior::kRemoved;
  if (name == "Isolated") return Behavior::kIsolated;
  if (name == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::kMergedWithNext;
  if (name == "Contiguous") return Behavior::kContiguous;
  MEGATRON_FAIL(where, ".behavior ", name, " is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, "
                "Contiguous");
}

// The origin (see Piece) of bytes [begin, end) of a piece whose origin is `origin`.
std::size_t sub_origin(std::size_t origin, std::size_t begin, std::size_t end) {
  return begin < origin ? std::min(origin, end) - begin : 0;
}

// A stretch of a piece and whether the pattern matched it.
struct Span {
  std::size_t begin, end;
  bool match;
};

// The `tokenizers` library's NormalizedString::split: what each behaviour keeps of the spans
// (which cover the piece in order), as new pieces; empty ones are dropped.
void apply_behavior(const Piece& piece, std::vector<Span>& spans, Behavior behavior, std::vector<Piece>& out) {
  std::vector<Span> kept;  // `match` here means "remove"
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kIsolated:
      for (const Span& s : spans) kept.push_back({s.begin, s.end, false});
      break;
    case Behavior::kRemoved:
      kept = spans;
      break;
    case Behavior::kContiguous:
      for (const Span& s : spans) {
        if (s.match == previous_match && !kept.empty()) {
          kept.back().end = s.end;
        } else {
          kept.push_back({s.begin, s.end, false});
        }
        previous_match = s.match;
      }
      break;
    case Behavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.match && !previous_match && !kept.empty()) {
          kept.back().end = s.end;
        } else {
          kept.push_back({s.begin, s.end, false});
        }
        previous_match = s.match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !previous_match && !kept.empty()) {
          kept.back().begin = it->begin;
        } else {
          kept.push_back({it->begin, it->end, false});
        }
        previous_match = it->match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
  }
  for (const Span& s : kept) {
    if (s.match || s.end == s.begin) continue;
    out.push_back({piece.text.substr(s.begin, s.end - s.begin), sub_origin(piece.origin, s.begin, s.end)});
  }
}

// Splits every piece by `find_spans(text, spans)` under `behavior`.
template <typename FindSpans>
void split_pieces(std::vector<Piece>& pieces, Behavior behavior, FindSpans&& find_spans) {
  std::vector<Piece> out;
  out.reserve(pieces.size());
  std::vector<Span> spans;
  for (const Piece& piece : pieces) {
    spans.clear();
    find_spans(std::string_view(piece.text), spans);
    apply_behavior(piece, spans, behavior, out);
  }
  pieces = std::move(out);
}

// Spans of a character predicate: every matching code point is a match of its own.
template <typename Pred>
void char_spans(std::string_view text, std::vector<Span>& spans, bool invert, Pred&& pred) {
  std::size_t last = 0;
  for (std::size_t i = 0; i < text.size();) {
    char32_t cp = 0;
    const std::size_t n = decode_utf8(text, i, cp);
    if (n == 0) throw_invalid_utf8(text, i);
    if (pred(cp)) {
      if (last < i) spans.push_back({last, i, invert});
      spans.push_back({i, i + n, !invert});
      last = i + n;
    }
    i += n;
  }
  if (last < text.size()) spans.push_back({last, text.size(), invert});
}

class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void split(std::vector<Piece>& pieces) const override {
    for (const auto& p : parts_) p->split(pieces);
  }
  bool byte_level() const override { return !parts_.empty() && parts_.back()->byte_level(); }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

class Split final : public PreTokenizer {
 public:
  Split(const std::string& regex, Behavior behavior, bool invert, const std::string& where)
      : regex_(regex, where), behavior_(behavior), invert_(invert) {}
  void split(std::vector<Piece>& pieces) const override {
    split_pieces(pieces, behavior_, [&](std::string_view text, std::vector<Span>& spans) {
      std::size_t last = 0;
      regex_.for_each_match(text, [&](std::size_t begin, std::size_t end) {
        if (begin == end) return;
        if (last < begin) spans.push_back({last, begin, invert_});
        spans.push_back({begin, end, !invert_});
        last = end;
      });
      if (last < text.size()) spans.push_back({last, text.size(), invert_});
    });
  }

 private:
  Regex regex_;
  Behavior behavior_;
  bool invert_;
};

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {}
  void split(std::vector<Piece>& pieces) const override {
    if (add_prefix_space_) {
      for (Piece& p : pieces) {
        if (p.text.empty() || p.text[0] == ' ') continue;
        p.text.insert(p.text.begin(), ' ');
        if (p.origin > 0) ++p.origin;
      }
    }
    if (!use_regex_) return;
    std::vector<Piece> out;
    out.reserve(pieces.size() * 4);
    for (const Piece& p : pieces) {
      std::size_t at = 0;
      pretokenize(p.text, [&](std::string_view s) {
        out.push_back({std::string(s), sub_origin(p.origin, at, at + s.size())});
        at += s.size();
      });
    }
    pieces = std::move(out);
  }
  bool byte_level() const override { return true; }

 private:
  bool add_prefix_space_, use_regex_;
};

class Metaspace final : public PreTokenizer {
 public:
  enum class Prepend { kAlways, kFirst, kNever };
  Metaspace(std::string replacement, Prepend prepend, bool split)
      : replacement_(std::move(replacement)), prepend_(prepend), split_(split) {
    decode_utf8(replacement_, 0, replacement_cp_);
  }
  void split(std::vector<Piece>& pieces) const override {
    for (Piece& p : pieces) {
      std::string text;
      std::size_t origin = 0;
      for (std::size_t i = 0; i < p.text.size(); ++i) {
        if (p.text[i] == ' ') {
          text += replacement_;
        } else {
          text += p.text[i];
        }
        if (i + 1 == p.origin) origin = text.size();
      }
      const bool starts = text.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && p.origin > 0))) {
        text.insert(0, replacement_);
        if (origin > 0) origin += replacement_.size();
      }
      p.text = std::move(text);
      p.origin = origin;
    }
    if (!split_) return;
    split_pieces(pieces, Behavior::kMergedWithNext, [&](std::string_view text, std::vector<Span>& spans) {
      char_spans(text, spans, false, [&](char32_t cp) { return cp == replacement_cp_; });
    });
  }

 private:
  std::string replacement_;
  char32_t replacement_cp_ = 0;
  Prepend prepend_;
  bool split_;
};

// A pre-tokenizer that splits on a character predicate with a fixed behaviour.
template <typename Pred>
class CharSplit final : public PreTokenizer {
 public:
  CharSplit(Behavior behavior, Pred pred) : behavior_(behavior), pred_(pred) {}
  void split(std::vector<Piece>& pieces) const override {
    split_pieces(pieces, behavior_, [&](std::string_view text, std::vector<Span>& spans) {
      char_spans(text, spans, false, pred_);
    });
  }

 private:
  Behavior behavior_;
  Pred pred_;
};

template <typename Pred>
std::unique_ptr<PreTokenizer> make_char_split(Behavior behavior, Pred pred) {
  return std::make_unique<CharSplit<Pred>>(behavior, pred);
}

// \w+|[^\w\s]+ of the Rust regex crate (the library's Whitespace pre-tokenizer): runs of word
// characters and runs of other non-space characters; whitespace is dropped.
class Whitespace final : public PreTokenizer {
 public:
  void split(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    for (const Piece& p : pieces) {
      int run = -1;  // 0: word run, 1: other run
      std::size_t begin = 0;
      const auto close = [&](std::size_t end) {
        if (run >= 0) out.push_back({p.text.substr(begin, end - begin), sub_origin(p.origin, begin, end)});
        run = -1;
      };
      for (std::size_t i = 0; i < p.text.size();) {
        char32_t cp = 0;
        const std::size_t n = decode_utf8(p.text, i, cp);
        if (n == 0) throw_invalid_utf8(p.text, i);
        const int kind = is_word_char(cp) ? 0 : (code_point_flags(cp) & flags::kSpace) ? 2 : 1;
        if (kind != run) {
          close(i);
          if (kind != 2) {
            run = kind;
            begin = i;
          }
        }
        i += n;
      }
      close(p.text.size());
    }
    pieces = std::move(out);
  }
};

}  // namespace

MetaspaceSettings parse_metaspace(const json& j, const std::string& where) {
  MetaspaceSettings m{j.at("replacement").get<std::string>(), j.value("prepend_scheme", std::string("always"))};
  char32_t cp = 0;
  const bool one = !m.replacement.empty() && decode_utf8(m.replacement, 0, cp) == m.replacement.size();
  MEGATRON_CHECK(one, where, ".replacement \"", m.replacement,
                 "\" is not one character (the tokenizers library refuses this file)");
  MEGATRON_CHECK(m.prepend_scheme == "always" || m.prepend_scheme == "first" || m.prepend_scheme == "never", where,
                 ".prepend_scheme ", m.prepend_scheme, " is not always, first or never");
  const bool no_prefix = j.contains("add_prefix_space") && j.at("add_prefix_space").is_boolean() &&
                         !j.at("add_prefix_space").get<bool>();
  MEGATRON_CHECK(!no_prefix || m.prepend_scheme == "never", where, ".add_prefix_space false does not match prepend_scheme ",
                 m.prepend_scheme, j.contains("prepend_scheme") ? "" : " (its default)",
                 " (the tokenizers library refuses this file)");
  return m;
}

std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  MEGATRON_CHECK(j.is_object() && j.contains("type"), where, " is not a pre-tokenizer object");
  const std::string type = j.at("type").get<std::string>();
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    const json& list = j.at("pretokenizers");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string at = where + ".pretokenizers[" + std::to_string(i) + "]";
      parts.push_back(parse_pre_tokenizer(list[i], at));
      MEGATRON_CHECK(!parts.back()->byte_level() || i + 1 == list.size(), at,
                     ": a ByteLevel pre-tokenizer is implemented only as the last step");
    }
    return std::make_unique<Sequence>(std::move(parts));
  }
  if (type == "Split") {
    return std::make_unique<Split>(pattern_regex(j.at("pattern"), where), parse_behavior(j.at("behavior"), where),
                                   j.value("invert", false), where);
  }
  if (type == "ByteLevel") return std::make_unique<ByteLevel>(j.value("add_prefix_space", true), j.value("use_regex", true));
  if (type == "Metaspace") {
    const MetaspaceSettings m = parse_metaspace(j, where);
    const Metaspace::Prepend prepend = m.prepend_scheme == "first"   ? Metaspace::Prepend::kFirst
                                       : m.prepend_scheme == "never" ? Metaspace::Prepend::kNever
                                                                     : Metaspace::Prepend::kAlways;
    return std::make_unique<Metaspace>(m.replacement, prepend, j.value("split", true));
  }
  if (type == "Digits") {
    const auto is_number = [](char32_t cp) { return (code_point_flags(cp) & flags::kNumber) != 0; };
    return make_char_split(j.value("individual_digits", false) ? Behavior::kIsolated : Behavior::kContiguous,
                           is_number);
  }
  if (type == "WhitespaceSplit") {
    return make_char_split(Behavior::kRemoved, [](char32_t cp) { return (code_point_flags(cp) & flags::kSpace) != 0; });
  }
  if (type == "Whitespace") return std::make_unique<Whitespace>();
  if (type == "Punctuation") {
    return make_char_split(j.contains("behavior") ? parse_behavior(j.at("behavior"), where) : Behavior::kIsolated,
                           library_punctuation);
  }
  MEGATRON_FAIL(where, " is a ", type, " pre-tokenizer, which this build does not implement (implemented: Sequence, "
                "Split, ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit, Punctuation)");
}

}  // namespace megatron::tokenizer::hf
