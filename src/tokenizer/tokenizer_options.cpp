// What TokenizerOptions knows of itself (see tokenizer.h): the flags that name its files, its
// description in messages, its Megatron identity (dataset cache names) and its saved form under
// Megatron's argument names.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "megatron/core/check.h"
#include "megatron/core/strings.h"
#include "megatron/tokenizer/tiktoken_tokenizer.h"
#include "megatron/tokenizer/tokenizer.h"

namespace megatron::tokenizer {
namespace {

using nlohmann::json;

// arguments[key] when it holds a value of that type (a saved run's None, or a value of another
// type, keeps the default).
void read(const json& arguments, const char* key, std::string& field) {
  const auto it = arguments.find(key);
  if (it != arguments.end() && it->is_string()) field = it->get<std::string>();
}
void read(const json& arguments, const char* key, std::int64_t& field) {
  const auto it = arguments.find(key);
  if (it != arguments.end() && it->is_number_integer()) field = it->get<std::int64_t>();
}
void read(const json& arguments, const char* key, std::vector<std::string>& field) {
  const auto it = arguments.find(key);
  if (it == arguments.end() || !it->is_array()) return;
  field.clear();
  for (const json& v : *it) {
    if (v.is_string()) field.push_back(v.get<std::string>());
  }
}

}  // namespace

bool TokenizerOptions::names_files() const {
  return reads_vocab_and_merges() ? !vocab_file.empty() : !tokenizer_model.empty();
}

bool TokenizerOptions::files_exist() const {
  const auto file = [](const std::string& path) { return !path.empty() && std::filesystem::exists(path); };
  if (reads_vocab_and_merges()) return file(vocab_file) && file(merge_file);
  if (reads_no_files()) return true;
  return file(tokenizer_model);
}

std::string TokenizerOptions::describe() const {
  if (reads_vocab_and_merges()) return "--vocab-file " + vocab_file + " --merge-file " + merge_file;
  if (reads_no_files()) return "--tokenizer-type NullTokenizer --vocab-size " + std::to_string(vocab_size);
  return str_cat("--tokenizer-type ", type_name(), " --tokenizer-model ", tokenizer_model);
}

std::vector<std::string> TokenizerOptions::flags() const {
  std::vector<std::string> f{"--tokenizer-type", std::string(type_name())};
  if (reads_vocab_and_merges()) {
    f.insert(f.end(), {"--vocab-file", vocab_file, "--merge-file", merge_file});
  } else if (reads_no_files()) {
    f.insert(f.end(), {"--vocab-size", std::to_string(vocab_size)});
  } else {
    f.insert(f.end(), {"--tokenizer-model", tokenizer_model});
  }
  if (vocab_extra_ids > 0) f.insert(f.end(), {"--vocab-extra-ids", std::to_string(vocab_extra_ids)});
  if (type == TokenizerType::kTikToken) {
    f.insert(f.end(), {"--tiktoken-pattern", tiktoken_pattern, "--tiktoken-num-special-tokens",
                       std::to_string(tiktoken_num_special_tokens)});
    if (vocab_size > 0) f.insert(f.end(), {"--vocab-size", std::to_string(vocab_size)});
    if (!tiktoken_special_tokens.empty()) {
      f.push_back("--tiktoken-special-tokens");
      f.insert(f.end(), tiktoken_special_tokens.begin(), tiktoken_special_tokens.end());
    }
  }
  return f;
}

TokenizerIdentity TokenizerOptions::identity() const {
  switch (type) {
    case TokenizerType::kGpt2Bpe: return {"_GPT2BPETokenizer", {vocab_file, merge_file}, {}};
    case TokenizerType::kNull: return {"_NullTokenizer", {}, {}};
    case TokenizerType::kHuggingFace: return {"_HuggingFaceTokenizer", {tokenizer_model}, {}};
    case TokenizerType::kTikToken:
      return {"CustomTikTokenizer",
              {tokenizer_model},
              {{"pattern", std::string(tiktoken_pattern_regex(parse_tiktoken_pattern(tiktoken_pattern)))},
               {"vocab_size", vocab_size > 0 ? std::to_string(vocab_size) : "None"},
               {"num_special_tokens", std::to_string(tiktoken_num_special_tokens)},
               {"special_tokens", tiktoken_special_tokens.empty() ? "None" : python_list_str(tiktoken_special_tokens)}}};
    case TokenizerType::kSentencePiece:
    case TokenizerType::kGptSentencePiece:
    case TokenizerType::kLlama2:
      // Only SentencePieceTokenizer passes --vocab-extra-ids on.
      return {str_cat("_", type_name()),
              {tokenizer_model},
              {{"vocab_extra_ids", std::to_string(type == TokenizerType::kSentencePiece ? vocab_extra_ids : 0)}}};
  }
  MEGATRON_FAIL("internal error: tokenizer type ", static_cast<int>(type));
}

json TokenizerOptions::to_json() const {
  return {{"tokenizer_type", type_name()},
          {"vocab_file", vocab_file},
          {"merge_file", merge_file},
          {"tokenizer_model", tokenizer_model},
          {"vocab_size", vocab_size},
          {"vocab_extra_ids", vocab_extra_ids},
          {"tiktoken_pattern", tiktoken_pattern},
          {"tiktoken_num_special_tokens", tiktoken_num_special_tokens},
          {"tiktoken_special_tokens", tiktoken_special_tokens}};
}

TokenizerOptions TokenizerOptions::from_json(const json& arguments) {
  TokenizerOptions o;
  if (!arguments.is_object()) return o;
  std::string type(o.type_name());
  read(arguments, "tokenizer_type", type);
  o.type = parse_tokenizer_type(type);
  read(arguments, "vocab_file", o.vocab_file);
  read(arguments, "merge_file", o.merge_file);
  read(arguments, "tokenizer_model", o.tokenizer_model);
  read(arguments, "vocab_size", o.vocab_size);
  read(arguments, "vocab_extra_ids", o.vocab_extra_ids);
  read(arguments, "tiktoken_pattern", o.tiktoken_pattern);
  read(arguments, "tiktoken_num_special_tokens", o.tiktoken_num_special_tokens);
  read(arguments, "tiktoken_special_tokens", o.tiktoken_special_tokens);
  return o;
}

}  // namespace megatron::tokenizer
