// Added tokens found in text (see hf_components.h): a byte trie searched leftmost-longest, then
// the `tokenizers` library's rules for each match: single_word drops a match that touches a word
// character (Unicode \w) on either side; lstrip / rstrip take the whitespace before / after it.
#include <unicode/uchar.h>

#include <algorithm>

#include "hf_components.h"
#include "megatron/tokenizer/pretokenizer.h"
#include "megatron/tokenizer/unicode.h"

namespace megatron::tokenizer::hf {
namespace {

// The code point that ends / starts `s` (valid UTF-8, not empty).
char32_t last_code_point(std::string_view s) {
  std::size_t at = s.size() - 1;
  while (at > 0 && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80) --at;
  char32_t cp = 0;
  decode_utf8(s, at, cp);
  return cp;
}
char32_t first_code_point(std::string_view s) {
  char32_t cp = 0;
  decode_utf8(s, 0, cp);
  return cp;
}

// Start of the whitespace that ends `s`.
std::size_t trailing_space_start(std::string_view s) {
  std::size_t end = s.size();
  while (end > 0) {
    std::size_t at = end - 1;
    while (at > 0 && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80) --at;
    char32_t cp = 0;
    decode_utf8(s, at, cp);
    if (!(code_point_flags(cp) & flags::kSpace)) break;
    end = at;
  }
  return end;
}
// Length of the whitespace that starts `s`.
std::size_t leading_space_length(std::string_view s) {
  std::size_t at = 0;
  while (at < s.size()) {
    char32_t cp = 0;
    const std::size_t n = decode_utf8(s, at, cp);
    if (n == 0 || !(code_point_flags(cp) & flags::kSpace)) break;
    at += n;
  }
  return at;
}

}  // namespace

bool is_word_char(char32_t cp) {
  const auto c = static_cast<UChar32>(cp);
  return u_hasBinaryProperty(c, UCHAR_ALPHABETIC) || (U_GET_GC_MASK(c) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) ||
         u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL);
}

struct AddedTokenMatcher::Trie {
  struct Node {
    std::vector<std::pair<unsigned char, std::int32_t>> children;  // sorted by byte
    std::int32_t token = -1;                                       // index into tokens_
  };
  std::vector<Node> nodes{Node{}};
  std::array<bool, 256> first{};

  void insert(std::string_view s, std::int32_t token) {
    std::int32_t at = 0;
    for (const char c : s) {
      const auto b = static_cast<unsigned char>(c);
      auto& kids = nodes[at].children;
      auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, std::int32_t{-1}));
      if (it == kids.end() || it->first != b) {
        it = kids.insert(it, {b, static_cast<std::int32_t>(nodes.size())});
        nodes.emplace_back();
      }
      at = it->second;
    }
    if (nodes[at].token < 0) nodes[at].token = token;  // the first of duplicates wins
    first[static_cast<unsigned char>(s[0])] = true;
  }

  // The longest token starting at text[at]: its index and length, or -1.
  std::int32_t longest(std::string_view text, std::size_t at, std::size_t& length) const {
    std::int32_t node = 0, best = -1;
    for (std::size_t i = at; i < text.size(); ++i) {
      const auto b = static_cast<unsigned char>(text[i]);
      const auto& kids = nodes[node].children;
      const auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, std::int32_t{-1}));
      if (it == kids.end() || it->first != b) break;
      node = it->second;
      if (nodes[node].token >= 0) {
        best = nodes[node].token;
        length = i + 1 - at;
      }
    }
    return best;
  }
};

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens, std::vector<std::string> contents)
    : tokens_(std::move(tokens)), trie_(std::make_unique<Trie>()) {
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    if (!contents[i].empty()) trie_->insert(contents[i], static_cast<std::int32_t>(i));
  }
}

AddedTokenMatcher::~AddedTokenMatcher() = default;

void AddedTokenMatcher::split(std::string_view text,
                              std::vector<std::pair<std::int32_t, std::string_view>>& out) const {
  out.clear();
  std::size_t done = 0;  // the library's start_offset
  for (std::size_t at = 0; at < text.size();) {
    std::size_t length = 0;
    const std::int32_t index =
        trie_->first[static_cast<unsigned char>(text[at])] ? trie_->longest(text, at, length) : -1;
    if (index < 0) {
      ++at;
      continue;
    }
    const AddedToken& token = tokens_[index];
    std::size_t start = at, stop = at + length;
    at = stop;  // the search goes on after the match, whatever the rules below make of it
    if (token.single_word) {
      const bool space_before = start == 0 || !is_word_char(last_code_point(text.substr(0, start)));
      const bool space_after = stop == text.size() || !is_word_char(first_code_point(text.substr(stop)));
      if (!space_before || !space_after) continue;
    }
    if (token.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), done);
    if (token.rstrip) stop += leading_space_length(text.substr(stop));
    if (done < start) out.emplace_back(-1, text.substr(done, start - done));
    out.emplace_back(token.id, text.substr(start, stop - start));
    done = stop;
  }
  if (done < text.size()) out.emplace_back(-1, text.substr(done));
}

}  // namespace megatron::tokenizer::hf
