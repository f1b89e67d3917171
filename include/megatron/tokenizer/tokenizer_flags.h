// Megatron's tokenizer flags (spec 6.8) on a CLI11 command line, for the tools that build a
// tokenizer from them (preprocess_data, dataset_info); megatron_train has them in its argument table.
#pragma once

#include <CLI/CLI.hpp>

#include "megatron/tokenizer/tokenizer.h"

namespace megatron::tokenizer {

// The flags as a tool's command line gives them: the type as its text, checked where the tool
// builds its tokenizer (options()), so that a bad --tokenizer-type is reported with the tool's
// other problems.
struct TokenizerFlags {
  std::string type{enum_name(TokenizerType::kGpt2Bpe)};
  TokenizerOptions given;  // every field but the type
  // `given` with the type; throws naming an unknown or unimplemented --tokenizer-type.
  TokenizerOptions options() const {
    TokenizerOptions o = given;
    o.type = parse_tokenizer_type(type);
    return o;
  }
};

inline void add_tokenizer_flags(CLI::App& app, TokenizerFlags& flags) {
  TokenizerOptions& o = flags.given;
  app.add_option("--tokenizer-type", flags.type,
                 "GPT2BPETokenizer, HuggingFaceTokenizer, TikTokenizer, SentencePieceTokenizer, "
                 "GPTSentencePieceTokenizer, Llama2Tokenizer or NullTokenizer")
      ->capture_default_str();
  app.add_option("--vocab-file", o.vocab_file, "GPT2BPETokenizer: vocab.json");
  app.add_option("--merge-file", o.merge_file, "GPT2BPETokenizer: merges.txt");
  app.add_option("--tokenizer-model", o.tokenizer_model,
                 "HuggingFaceTokenizer: a folder with tokenizer.json; TikTokenizer: the vocabulary .json; "
                 "SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer: the SentencePiece .model");
  app.add_option("--vocab-size", o.vocab_size,
                 "TikTokenizer: ids below this (default 131072); NullTokenizer: the vocabulary size");
  app.add_option("--tiktoken-pattern", o.tiktoken_pattern, "TikTokenizer: v1 or v2");
  app.add_option("--tiktoken-num-special-tokens", o.tiktoken_num_special_tokens,
                 "TikTokenizer: ids reserved for special tokens")
      ->capture_default_str();
  app.add_option("--tiktoken-special-tokens", o.tiktoken_special_tokens,
                 "TikTokenizer: the special tokens (must include <unk> <s> </s>)");
}

}  // namespace megatron::tokenizer
