// Strict JSON scanner for jsonl documents (see json_document.h). Recursive descent over bytes;
// columns in messages are 1-based byte positions in the line.
#include "megatron/data/json_document.h"

#include "megatron/core/check.h"
#include "megatron/tokenizer/unicode.h"

namespace megatron::data {
namespace {

constexpr int kMaxDepth = 1000;  // Python's json gives up (RecursionError) around here too

struct ParseFailure {
  std::string message;
};

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

const char* kind_of(char c) {
  switch (c) {
    case '{': return "an object";
    case '[': return "a list";
    case 't':
    case 'f': return "a boolean";
    case 'n': return "null";
    default: return "a number";
  }
}

}  // namespace

JsonDocumentParser::JsonDocumentParser(std::vector<std::string> keys)
    : keys_(std::move(keys)),
      pieces_(keys_.size()),
      seen_(keys_.size()),
      type_errors_(keys_.size()),
      views_(keys_.size()) {}

void JsonDocumentParser::fail_at(std::size_t pos, const std::string& what) const {
  throw ParseFailure{str_cat("invalid JSON (", what, " at column ", pos + 1, ")")};
}

// A lone surrogate is valid JSON (Python decodes it) but not Unicode text: Megatron fails when it
// encodes such a text, so it is an error in the texts we tokenize and ignored elsewhere.
void JsonDocumentParser::lone_surrogate(std::size_t esc, bool text) const {
  if (!text) return;
  throw ParseFailure{str_cat("lone surrogate escape \\u", line_.substr(esc + 2, 4), " at column ", esc + 1,
                             " is not valid Unicode text")};
}

void JsonDocumentParser::skip_ws() {
  while (pos_ < line_.size()) {
    const char c = line_[pos_];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    ++pos_;
  }
}

bool JsonDocumentParser::parse(std::string_view line, std::string& error) {
  line_ = line;
  pos_ = 0;
  arena_.clear();
  for (std::size_t k = 0; k < keys_.size(); ++k) {
    pieces_[k].clear();
    seen_[k] = false;
    type_errors_[k].clear();
    views_[k].clear();
  }
  if (line_.starts_with("\xEF\xBB\xBF")) {  // json.loads: "Unexpected UTF-8 BOM"
    error = "the line starts with a UTF-8 byte-order mark (BOM, bytes EF BB BF), which only the start of a file "
            "may hold (files concatenated with their BOMs?); remove it";
    return false;
  }
  try {
    skip_ws();
    if (pos_ >= line_.size()) fail_at(pos_, "expecting value");
    if (line_[pos_] != '{') {
      // Parse it anyway so that malformed input is reported as such.
      parse_value(0, nullptr, false, {});
      skip_ws();
      if (pos_ < line_.size()) fail_at(pos_, "extra data");
      throw ParseFailure{"the line is not a JSON object"};
    }
    ++pos_;
    parse_object_members(1);
    skip_ws();
    if (pos_ < line_.size()) fail_at(pos_, "extra data");
  } catch (const ParseFailure& f) {
    error = f.message;
    return false;
  }
  for (std::size_t k = 0; k < keys_.size(); ++k) {
    if (!seen_[k]) {
      error = str_cat("no \"", keys_[k], "\" key");
      return false;
    }
    if (!type_errors_[k].empty()) {
      error = type_errors_[k];
      return false;
    }
    for (const Piece& p : pieces_[k]) {
      views_[k].push_back(p.in_arena ? std::string_view(arena_).substr(p.offset, p.size)
                                     : line_.substr(p.offset, p.size));
    }
  }
  return true;
}

void JsonDocumentParser::parse_object_members(int depth) {
  skip_ws();
  if (pos_ < line_.size() && line_[pos_] == '}') {
    ++pos_;
    return;
  }
  while (true) {
    skip_ws();
    if (pos_ >= line_.size() || line_[pos_] != '"') {
      fail_at(pos_, "expecting property name enclosed in double quotes");
    }
    const Piece key_piece = parse_string(false);
    const std::string_view key = key_piece.in_arena
                                     ? std::string_view(arena_).substr(key_piece.offset, key_piece.size)
                                     : line_.substr(key_piece.offset, key_piece.size);
    std::vector<Piece>* capture = nullptr;
    if (depth == 1) {
      for (std::size_t k = 0; k < keys_.size(); ++k) {
        if (keys_[k] == key) {
          pieces_[k].clear();  // a repeated key: the last value wins, as in Python
          type_errors_[k].clear();
          seen_[k] = true;
          capture = &pieces_[k];
        }
      }
    }
    const std::string key_copy = capture ? std::string(key) : std::string();
    skip_ws();
    if (pos_ >= line_.size() || line_[pos_] != ':') fail_at(pos_, "expecting ':' delimiter");
    ++pos_;
    skip_ws();
    parse_value(depth, capture, true, key_copy);
    skip_ws();
    if (pos_ < line_.size() && line_[pos_] == ',') {
      ++pos_;
      continue;
    }
    if (pos_ < line_.size() && line_[pos_] == '}') {
      ++pos_;
      return;
    }
    fail_at(pos_, "expecting ',' delimiter");
  }
}

void JsonDocumentParser::parse_value(int depth, std::vector<Piece>* capture, bool capture_list,
                                     std::string_view key) {
  if (depth > kMaxDepth) fail_at(pos_, "nesting deeper than 1000 levels");
  if (pos_ >= line_.size()) fail_at(pos_, "expecting value");
  const char c = line_[pos_];
  if (c == '"') {
    const Piece p = parse_string(capture != nullptr);
    if (capture) capture->push_back(p);
    return;
  }
  if (capture && !(c == '[' && capture_list)) {
    // Recorded, not thrown: a syntax error later in the line is reported first, and a later
    // value of the same key replaces this one (both as with Python's json.loads).
    std::string& problem = type_errors_[static_cast<std::size_t>(capture - pieces_.data())];
    if (problem.empty()) {
      problem = capture_list
                    ? str_cat("\"", key, "\" is ", kind_of(c), ", not a string or a list of strings")
                    : str_cat("\"", key, "\"[", capture->size(), "] is ", kind_of(c), ", not a string");
    }
    parse_value(depth, nullptr, false, {});
    return;
  }
  if (c == '{') {
    ++pos_;
    parse_object_members(depth + 1);
    return;
  }
  if (c == '[') {
    ++pos_;
    skip_ws();
    if (pos_ < line_.size() && line_[pos_] == ']') {
      ++pos_;
      return;
    }
    while (true) {
      skip_ws();
      parse_value(depth + 1, capture, false, key);
      skip_ws();
      if (pos_ < line_.size() && line_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < line_.size() && line_[pos_] == ']') {
        ++pos_;
        return;
      }
      fail_at(pos_, "expecting ',' delimiter");
    }
  }
  if (c == 't') return expect_literal("true");
  if (c == 'f') return expect_literal("false");
  if (c == 'n') return expect_literal("null");
  if (c == 'N') return expect_literal("NaN");
  if (c == 'I') return expect_literal("Infinity");
  if (c == '-' && line_.substr(pos_, 9) == "-Infinity") {
    pos_ += 9;
    return;
  }
  if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
  fail_at(pos_, "expecting value");
}

void JsonDocumentParser::expect_literal(std::string_view word) {
  if (line_.substr(pos_, word.size()) != word) fail_at(pos_, "expecting value");
  pos_ += word.size();
}

void JsonDocumentParser::parse_number() {
  const std::size_t start = pos_;
  auto digits = [&] {
    const std::size_t from = pos_;
    while (pos_ < line_.size() && line_[pos_] >= '0' && line_[pos_] <= '9') ++pos_;
    return pos_ - from;
  };
  if (line_[pos_] == '-') ++pos_;
  if (pos_ < line_.size() && line_[pos_] == '0') {
    ++pos_;
  } else if (digits() == 0) {
    fail_at(start, "expecting value");
  }
  if (pos_ < line_.size() && line_[pos_] == '.') {
    const std::size_t dot = pos_++;
    if (digits() == 0) {
      pos_ = dot;  // Python stops the number before the dot: "1." is "extra data"
      return;
    }
  }
  if (pos_ < line_.size() && (line_[pos_] == 'e' || line_[pos_] == 'E')) {
    const std::size_t e = pos_++;
    if (pos_ < line_.size() && (line_[pos_] == '+' || line_[pos_] == '-')) ++pos_;
    if (digits() == 0) pos_ = e;
  }
}

void JsonDocumentParser::unicode_escape(std::size_t esc, bool text) {
  const std::size_t n = line_.size();
  auto read_hex4 = [&](std::size_t at) -> int {
    if (at + 4 > n) return -1;
    int v = 0;
    for (std::size_t i = at; i < at + 4; ++i) {
      const int h = hex_value(line_[i]);
      if (h < 0) return -1;
      v = v * 16 + h;
    }
    return v;
  };
  const int u = read_hex4(pos_);
  if (u < 0) fail_at(esc + 1, "invalid \\uXXXX escape");  // at the 'u', as Python says
  pos_ += 4;
  char32_t cp = static_cast<char32_t>(u);
  if (u >= 0xD800 && u <= 0xDBFF) {
    const int low = (pos_ + 1 < n && line_[pos_] == '\\' && line_[pos_ + 1] == 'u') ? read_hex4(pos_ + 2) : -1;
    if (low >= 0xDC00 && low <= 0xDFFF) {
      pos_ += 6;
      cp = 0x10000 + ((cp - 0xD800) << 10) + (static_cast<char32_t>(low) - 0xDC00);
    } else {
      lone_surrogate(esc, text);
      cp = 0xFFFD;
    }
  } else if (u >= 0xDC00 && u <= 0xDFFF) {
    lone_surrogate(esc, text);
    cp = 0xFFFD;
  }
  tokenizer::append_utf8(arena_, cp);
}

JsonDocumentParser::Piece JsonDocumentParser::parse_string(bool text) {
  const std::size_t open = pos_++;  // at the opening quote
  const std::size_t begin = pos_;
  bool decoding = false;            // an escape was seen: the text goes to the arena
  std::size_t arena_begin = arena_.size();
  const auto* s = reinterpret_cast<const unsigned char*>(line_.data());
  const std::size_t n = line_.size();
  std::size_t run = pos_;  // start of the verbatim run not yet copied to the arena
  while (true) {
    while (pos_ < n && s[pos_] >= 0x20 && s[pos_] < 0x80 && s[pos_] != '"' && s[pos_] != '\\') ++pos_;
    if (pos_ >= n) fail_at(open, "unterminated string starting");
    const unsigned char c = s[pos_];
    if (c == '"') {
      const std::size_t end = pos_++;
      if (!decoding) return {false, begin, end - begin};
      arena_.append(line_.substr(run, end - run));
      return {true, arena_begin, arena_.size() - arena_begin};
    }
    if (c < 0x20) fail_at(pos_, "invalid control character");
    if (c >= 0x80) {
      char32_t cp = 0;
      const std::size_t len = tokenizer::decode_utf8(line_, pos_, cp);
      if (len == 0) throw ParseFailure{str_cat("invalid UTF-8 at column ", pos_ + 1)};
      pos_ += len;
      continue;
    }
    // A backslash escape.
    if (!decoding) {
      decoding = true;
      arena_begin = arena_.size();
    }
    arena_.append(line_.substr(run, pos_ - run));
    const std::size_t esc = pos_;
    if (pos_ + 1 >= n) fail_at(open, "unterminated string starting");
    const char e = line_[pos_ + 1];
    pos_ += 2;
    switch (e) {
      case '"': arena_ += '"'; break;
      case '\\': arena_ += '\\'; break;
      case '/': arena_ += '/'; break;
      case 'b': arena_ += '\b'; break;
      case 'f': arena_ += '\f'; break;
      case 'n': arena_ += '\n'; break;
      case 'r': arena_ += '\r'; break;
      case 't': arena_ += '\t'; break;
      case 'u': unicode_escape(esc, text); break;
      default: fail_at(esc, "invalid \\escape");
    }
    run = pos_;
  }
}

}  // namespace megatron::data
