// A tokenizer's files and their copies' names (see tokenizer_files.h).
#include "megatron/tokenizer/tokenizer_files.h"

#include <filesystem>

#include "megatron/core/file_io.h"

namespace megatron::tokenizer {
namespace fs = std::filesystem;
namespace {

// What transformers' save_pretrained writes for a tokenizer, and the files it reads beside
// tokenizer.json; a HuggingFace folder's weights and model configuration are not among them.
constexpr const char* kHuggingFaceFiles[] = {"tokenizer.json",        "tokenizer_config.json", "special_tokens_map.json",
                                             "added_tokens.json",     "chat_template.jinja",   "tokenizer.model",
                                             "vocab.json",            "merges.txt"};

}  // namespace

std::vector<TokenizerFile> tokenizer_files(const TokenizerOptions& o) {
  std::vector<TokenizerFile> files;
  const auto add = [&](const fs::path& source, const std::string& name) {
    std::error_code ec;
    if (!source.empty() && fs::is_regular_file(source, ec)) files.push_back({source.string(), name});
  };
  if (o.type == TokenizerType::kGpt2Bpe) {
    add(o.vocab_file, "vocab.json");
    add(o.merge_file, "merges.txt");
  } else if (o.type == TokenizerType::kHuggingFace) {
    const fs::path model(o.tokenizer_model);
    std::error_code ec;
    const bool is_file = fs::is_regular_file(model, ec);
    const fs::path folder = is_file ? model.parent_path() : model;
    if (is_file) add(model, "tokenizer.json");
    for (const char* name : kHuggingFaceFiles) {
      if (!(is_file && std::string(name) == "tokenizer.json")) add(folder / name, name);
    }
  } else if (o.type == TokenizerType::kTikToken) {
    add(o.tokenizer_model, "tokenizer.json");
  } else if (is_sentencepiece(o.type)) {
    add(o.tokenizer_model, "tokenizer.model");
  }
  return files;
}

std::vector<std::pair<std::string, std::string>> read_tokenizer_files(const TokenizerOptions& options) {
  std::vector<std::pair<std::string, std::string>> contents;
  for (const auto& file : tokenizer_files(options)) {
    contents.emplace_back(file.name, read_text_file(file.source, "the tokenizer file"));
  }
  return contents;
}

TokenizerOptions options_reading_copies(const TokenizerOptions& options, const std::string& folder) {
  TokenizerOptions o = options;
  const fs::path dir(folder);
  if (o.type == TokenizerType::kGpt2Bpe) {
    o.vocab_file = (dir / "vocab.json").string();
    o.merge_file = (dir / "merges.txt").string();
  } else if (o.type == TokenizerType::kHuggingFace) {
    o.tokenizer_model = dir.string();
  } else if (o.type == TokenizerType::kTikToken) {
    o.tokenizer_model = (dir / "tokenizer.json").string();
  } else if (is_sentencepiece(o.type)) {
    o.tokenizer_model = (dir / "tokenizer.model").string();
  }
  return o;
}

}  // namespace megatron::tokenizer
