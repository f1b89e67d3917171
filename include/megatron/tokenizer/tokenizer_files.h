// The files a tokenizer is read from, under the names Megatron gives their copies in a checkpoint
// (save_tokenizer_assets: iter_XXXXXXX/tokenizer/), and the options that read those copies back:
//   GPT2BPETokenizer                  vocab.json, merges.txt
//   HuggingFaceTokenizer              tokenizer.json and the configuration beside it
//                                     (tokenizer_config.json, special_tokens_map.json, ...)
//   SentencePiece types               tokenizer.model
//   TikTokenizer                      tokenizer.json (the vocabulary .json)
//   NullTokenizer                     nothing
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "megatron/tokenizer/tokenizer.h"

namespace megatron::tokenizer {

struct TokenizerFile {
  std::string source;  // the path the options name (or found beside it)
  std::string name;    // the copy's name
};

// Tokenizer files a tool's flags name: --vocab-file and --merge-file (GPT2BPETokenizer) or
// --tokenizer-model (the other types); empty when not given.
struct TokenizerChoice {
  std::string vocab_file;
  std::string merge_file;
  std::string tokenizer_model;
};

// The files of `options`' tokenizer that exist (a missing one is the tokenizer's own error, when
// it is built).
std::vector<TokenizerFile> tokenizer_files(const TokenizerOptions& options);

// The contents of tokenizer_files(options), as (copy's name, bytes), for a checkpoint to carry;
// throws naming a file that cannot be read.
std::vector<std::pair<std::string, std::string>> read_tokenizer_files(const TokenizerOptions& options);

// `options` with its paths pointing at the copies in `folder` (what tokenizer_files named them).
TokenizerOptions options_reading_copies(const TokenizerOptions& options, const std::string& folder);

}  // namespace megatron::tokenizer
