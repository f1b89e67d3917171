// The tokenizer files of a HuggingFace export (see hf_tokenizer_export.h).
#include "megatron/tokenizer/hf_tokenizer_export.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <tuple>
#include <unordered_map>

#include "megatron/core/check.h"
#include "megatron/core/file_io.h"
#include "megatron/tokenizer/gpt2_bpe_tokenizer.h"
#include "megatron/tokenizer/sentencepiece_tokenizer.h"
#include "megatron/tokenizer/tiktoken_tokenizer.h"
#include "megatron/tokenizer/tokenizer_files.h"
#include "megatron/tokenizer/unicode.h"

namespace megatron::tokenizer {
namespace {

using json = nlohmann::ordered_json;
using Files = std::vector<std::pair<std::string, std::string>>;

std::string text_of(const json& j) { return j.dump(2) + "\n"; }

// transformers' GPT2Tokenizer over Megatron's GPT-2 files: <|endoftext|> is bos, eos and unk, and
// (as in Megatron's GPT2BPETokenizer) text only, never split out of a document.
Files gpt2_files(const TokenizerOptions& options, std::int64_t model_max_length) {
  const std::string eod = "<|endoftext|>";
  return {{"vocab.json", read_text_file(options.vocab_file, "--vocab-file")},
          {"merges.txt", read_text_file(options.merge_file, "--merge-file")},
          {"tokenizer_config.json", text_of({{"tokenizer_class", "GPT2Tokenizer"},
                                             {"model_max_length", model_max_length},
                                             {"bos_token", eod},
                                             {"eos_token", eod},
                                             {"unk_token", eod},
                                             {"add_prefix_space", false},
                                             {"split_special_tokens", true}})},
          {"special_tokens_map.json", text_of({{"bos_token", eod}, {"eos_token", eod}, {"unk_token", eod}})}};
}

// transformers' SentencePieceBackend: the library's own encoding of tokenizer.model.
Files sentencepiece_files(const TokenizerOptions& options, std::int64_t model_max_length) {
  const auto tokenizer = build_tokenizer(options);
  const SentencePieceSpecialTokens names = sentencepiece_special_tokens(*tokenizer);
  json config = {{"tokenizer_class", "SentencePieceBackend"}, {"model_max_length", model_max_length}};
  auto name = [&](const char* key, const std::string& text) { config[key] = text.empty() ? json() : json(text); };
  name("bos_token", names.bos);
  name("eos_token", names.eos);
  name("unk_token", names.unk);
  name("pad_token", names.pad);
  config["legacy"] = true;  // SentencePiece's dummy-prefix space before each stretch of text, as Megatron
  config["clean_up_tokenization_spaces"] = false;
  if (options.type == TokenizerType::kSentencePiece) {
    json added = json::object();
    for (const auto& [text, id] : names.added) {
      added[std::to_string(id)] = {{"content", text}, {"lstrip", false}, {"normalized", false}, {"rstrip", false},
                                   {"single_word", false}, {"special", true}};
    }
    config["added_tokens_decoder"] = std::move(added);
    config["split_special_tokens"] = false;
  } else {
    config["split_special_tokens"] = true;
    if (options.type == TokenizerType::kLlama2) config["special_tokens_pattern"] = "bos";
  }
  return {{"tokenizer.model", read_text_file(options.tokenizer_model, "--tokenizer-model")},
          {"tokenizer_config.json", text_of(config)}};
}

// Bytes as GPT-2's byte-level alphabet spells them (the strings of a byte-level tokenizer.json).
std::string byte_level(std::string_view bytes) {
  static const auto table = gpt2_byte_to_unicode();
  std::string out;
  for (const char c : bytes) append_utf8(out, table[static_cast<unsigned char>(c)]);
  return out;
}

Files tiktoken_files(const TokenizerOptions& options, std::int64_t model_max_length) {
  const TiktokenOptions tik = tiktoken_options(options);
  const detail::TiktokenVocabulary vocabulary = detail::load_tiktoken_vocabulary(tik);
  const auto num_special = static_cast<std::int64_t>(vocabulary.specials.size());
  std::unordered_map<std::string_view, std::int64_t> rank;
  rank.reserve(vocabulary.tokens.size());
  for (std::size_t i = 0; i < vocabulary.tokens.size(); ++i) rank.emplace(vocabulary.tokens[i], static_cast<std::int64_t>(i));

  // nlohmann::json, not ordered_json: its objects are search trees, ordered_json's are scanned on
  // every insertion (quadratic for 131,072 tokens). tokenizers reads the keys in any order.
  nlohmann::json vocab = nlohmann::json::object();
  nlohmann::json added = nlohmann::json::array();
  for (std::int64_t id = 0; id < num_special; ++id) {
    const std::string& text = vocabulary.specials[id];
    vocab[text] = id;
    added.push_back({{"id", id}, {"content", text}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  }
  // Every split of a token into two tokens is a merge, ordered by the token's rank, then the
  // parts' ranks: HuggingFace's BPE then merges the lowest-ranked joinable pair first, as tiktoken.
  std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> merges;  // (rank, left rank, right rank)
  for (std::size_t r = 0; r < vocabulary.tokens.size(); ++r) {
    const std::string& token = vocabulary.tokens[r];
    const std::string spelled = byte_level(token);
    MEGATRON_CHECK(!vocab.contains(spelled), "--tokenizer-model ", tik.path, ": token ", r,
                   " is spelled as the special token \"", spelled,
                   "\": a tokenizer.json cannot hold both under one name");
    vocab[spelled] = static_cast<std::int64_t>(r) + num_special;
    for (std::size_t i = 1; i < token.size(); ++i) {
      const auto left = rank.find(std::string_view(token).substr(0, i));
      const auto right = rank.find(std::string_view(token).substr(i));
      if (left != rank.end() && right != rank.end()) {
        merges.emplace_back(static_cast<std::int64_t>(r), left->second, right->second);
      }
    }
  }
  std::sort(merges.begin(), merges.end());
  nlohmann::json merge_list = nlohmann::json::array();
  for (const auto& [r, left, right] : merges) {
    merge_list.push_back({byte_level(vocabulary.tokens[left]), byte_level(vocabulary.tokens[right])});
  }
  const nlohmann::json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", std::move(added)},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", std::string(tiktoken_pattern_regex(tik.pattern))}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", true},
        {"vocab", std::move(vocab)},
        {"merges", std::move(merge_list)}}}};
  json config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                 {"model_max_length", model_max_length},
                 {"bos_token", "<s>"},
                 {"eos_token", "</s>"},
                 {"unk_token", "<unk>"}};
  const auto& specials = vocabulary.specials;
  if (std::find(specials.begin(), specials.end(), "<pad>") != specials.end()) config["pad_token"] = "<pad>";
  config["clean_up_tokenization_spaces"] = false;
  config["split_special_tokens"] = true;
  return {{"tokenizer.json", tokenizer.dump() + "\n"}, {"tokenizer_config.json", text_of(config)}};
}

}  // namespace

std::vector<std::pair<std::string, std::string>> hf_tokenizer_files(const TokenizerOptions& options,
                                                                     std::int64_t model_max_length) {
  switch (options.type) {
    case TokenizerType::kGpt2Bpe: return gpt2_files(options, model_max_length);
    case TokenizerType::kHuggingFace: {
      Files files = read_tokenizer_files(options);
      MEGATRON_CHECK(!files.empty(), "--tokenizer-model ", options.tokenizer_model, ": no tokenizer files there");
      return files;
    }
    case TokenizerType::kSentencePiece:
    case TokenizerType::kGptSentencePiece:
    case TokenizerType::kLlama2: return sentencepiece_files(options, model_max_length);
    case TokenizerType::kTikToken: return tiktoken_files(options, model_max_length);
    case TokenizerType::kNull: break;  // no files: the ids are the text
  }
  return {};
}

}  // namespace megatron::tokenizer
