// Megatron's TikTokenizer (`--tokenizer-type TikTokenizer`): a byte-level BPE vocabulary in
// Megatron's JSON format (a list of {"rank", "token_bytes" (base64), "token_str"}, rank i at
// position i, the first 256 the single bytes), cut to --vocab-size minus the special tokens and
// shifted up past them; the special tokens first (<unk> <s> </s> and Megatron's <SPECIAL_i>
// fillers up to --tiktoken-num-special-tokens); text split by one of Megatron's two tiktoken
// patterns and encoded as tiktoken's encode_ordinary does (special-token text stays text); the
// end of document is </s> (id 2 with the default special tokens).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "megatron/tokenizer/tokenizer.h"

namespace megatron::tokenizer {

enum class TiktokenPattern {
  kV1,  // [^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+
  kV2,  // upper/lower-case aware words, single digits, punctuation runs with [\r\n/]*, whitespace
};

// "v1" / "v2" (--tiktoken-pattern); throws naming the flag otherwise.
TiktokenPattern parse_tiktoken_pattern(std::string_view name);
// The pattern's regex as Megatron writes it (it is part of the tokenizer's identity in the
// dataset cache names).
std::string_view tiktoken_pattern_regex(TiktokenPattern pattern);

struct TiktokenOptions {
  std::string path;  // --tokenizer-model: the .json vocabulary
  TiktokenPattern pattern = TiktokenPattern::kV2;
  std::int64_t vocab_size = 131072;          // --vocab-size (Megatron's default 2^17)
  std::int64_t num_special_tokens = 1000;    // --tiktoken-num-special-tokens
  std::vector<std::string> special_tokens;   // --tiktoken-special-tokens; empty: <unk> <s> </s>
};

// The TikTokenizer's settings from the tokenizer flags (--tokenizer-model, --tiktoken-pattern,
// --vocab-size, --tiktoken-num-special-tokens, --tiktoken-special-tokens); throws naming a missing
// or wrong --tiktoken-pattern.
TiktokenOptions tiktoken_options(const TokenizerOptions& options);

// Loads the vocabulary and checks it as Megatron does; throws megatron::Error naming the file, the
// entry and the flag that is wrong.
std::unique_ptr<Tokenizer> make_tiktoken_tokenizer(const TiktokenOptions& options);

namespace detail {
// The vocabulary as Megatron loads it: the token bytes by rank, cut to --vocab-size less the
// special tokens, and the special tokens (ids 0..); the tokens' ids are their ranks shifted past
// the special tokens. Throws as make_tiktoken_tokenizer does.
struct TiktokenVocabulary {
  std::vector<std::string> tokens;
  std::vector<std::string> specials;
};
TiktokenVocabulary load_tiktoken_vocabulary(const TiktokenOptions& options);

// Calls fn(piece) for each piece of `text` under `pattern` (the regex's leftmost-first matches,
// by a hand-written scanner); the pieces concatenate to `text`. Throws on invalid UTF-8.
void split_tiktoken(std::string_view text, TiktokenPattern pattern, const std::function<void(std::string_view)>& fn);
}  // namespace detail

}  // namespace megatron::tokenizer
