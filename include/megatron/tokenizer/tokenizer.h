// The tokenizer interface every tool and the trainer use, and the factory that maps Megatron's
// --tokenizer-type names to implementations. A Tokenizer is immutable and shared between
// threads; each thread encodes through its own Encoder (which may cache).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "megatron/core/enum_names.h"

namespace megatron::tokenizer {

class Encoder {
 public:
  virtual ~Encoder() = default;
  // Appends the ids of `text` (UTF-8) to `out`. Throws megatron::Error on invalid UTF-8.
  virtual void encode(std::string_view text, std::vector<std::int32_t>& out) = 0;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::string type() const = 0;           // Megatron's --tokenizer-type name
  virtual std::size_t vocab_size() const = 0;     // before padding for the model
  // The end-of-document id; -1 when the tokenizer has none (a HuggingFace folder without an
  // eos_token, a SentencePiece model without EOS: Megatron's None), which only --append-eod,
  // an empty prompt and an export's eos_token_id need.
  virtual std::int32_t eod() const = 0;
  // Megatron's tokenizer.pad, the id the GPT dataset pads with and masks out of the loss wherever
  // it occurs: only the SentencePiece types have one (the others raise there, which means -1).
  virtual std::optional<std::int32_t> pad() const { return std::nullopt; }
  // The beginning-of-sequence id, for the types that have one (Megatron's tokenizer.bos): the
  // HuggingFace tokenizer's bos_token, the SentencePiece BOS, TikTokenizer's <s>.
  virtual std::optional<std::int32_t> bos() const { return std::nullopt; }
  virtual std::unique_ptr<Encoder> make_encoder() const = 0;
  // Ids to text; bytes that are not valid UTF-8 become U+FFFD. Throws on ids out of range.
  virtual std::string decode(std::span<const std::int32_t> ids) const = 0;

  // Convenience for one-off calls (no cache kept between calls).
  std::vector<std::int32_t> encode(std::string_view text) const;
};

// The text of ids that arrive one at a time (generation), printable as it comes: a character can
// span tokens (GPT-2 spells many as two or three byte tokens), and the bytes so far may end inside
// one, which decode() shows as U+FFFD. add() returns the text that has become final: the decode
// of everything so far, less a trailing U+FFFD the next ids may still complete; finish() returns
// what was held back. The pieces joined equal decode() of all the ids.
class TextStream {
 public:
  explicit TextStream(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  std::string add(std::int32_t id);
  std::string finish();

 private:
  std::string take(bool last);
  const Tokenizer& tokenizer_;
  std::vector<std::int32_t> ids_;
  std::size_t emitted_ = 0;  // bytes of the decode already returned
};

// Megatron's --tokenizer-type values this build implements, spelt as Megatron spells them (the
// flag parsers, the argument dump and saved runs read this one table).
enum class TokenizerType { kGpt2Bpe, kHuggingFace, kTikToken, kNull, kSentencePiece, kGptSentencePiece, kLlama2 };
inline constexpr std::array<EnumName<TokenizerType>, 7> kTokenizerTypeNames{{
    {TokenizerType::kGpt2Bpe, "GPT2BPETokenizer"},
    {TokenizerType::kHuggingFace, "HuggingFaceTokenizer"},
    {TokenizerType::kTikToken, "TikTokenizer"},
    {TokenizerType::kNull, "NullTokenizer"},
    {TokenizerType::kSentencePiece, "SentencePieceTokenizer"},
    {TokenizerType::kGptSentencePiece, "GPTSentencePieceTokenizer"},
    {TokenizerType::kLlama2, "Llama2Tokenizer"}}};
inline std::span<const EnumName<TokenizerType>> enum_names(TokenizerType) { return kTokenizerTypeNames; }
// Every --tokenizer-type Megatron's argparse accepts, in its order ("invalid choice" lists them);
// those outside kTokenizerTypeNames are "not implemented yet" here.
inline constexpr std::string_view kMegatronTokenizerTypes[] = {
    "BertWordPieceLowerCase", "BertWordPieceCase", "GPT2BPETokenizer", "SentencePieceTokenizer",
    "GPTSentencePieceTokenizer", "HuggingFaceTokenizer", "Llama2Tokenizer", "TikTokenizer", "MultimodalTokenizer",
    "NullTokenizer", "NullMultimodalTokenizer", "SFTTokenizer"};

// The type spelt `name`; throws megatron::Error saying whether it is a Megatron type this build
// does not implement yet or no Megatron type at all, listing the supported ones.
TokenizerType parse_tokenizer_type(std::string_view name);
// SentencePieceTokenizer, GPTSentencePieceTokenizer and Llama2Tokenizer: a SentencePiece .model.
bool is_sentencepiece(TokenizerType type);

// Megatron's tokenizer class name and arguments, as core_v0.12.0's MegatronTokenizer records them
// (unique_identifiers): the class, the paths it was given, then its keyword arguments as Python's
// str() prints them. They name the dataset index caches, so a run shares Megatron's caches.
struct TokenizerIdentity {
  std::string class_name;
  std::vector<std::string> paths;
  std::vector<std::pair<std::string, std::string>> arguments;  // (name, str(value)), in order
};

// Megatron's tokenizer flags (spec 6.8) that the implemented types read.
struct TokenizerOptions {
  TokenizerType type = TokenizerType::kGpt2Bpe;
  std::string vocab_file;
  std::string merge_file;
  std::int64_t vocab_size = 0;  // --vocab-size: NullTokenizer's size; TikTokenizer's cut (0: 131072)
  std::string tokenizer_model;  // --tokenizer-model: TikTokenizer's vocabulary .json; SentencePiece's .model
  std::int64_t vocab_extra_ids = 0;  // --vocab-extra-ids: SentencePieceTokenizer's <extra_id_i> tokens
  std::string tiktoken_pattern;  // --tiktoken-pattern v1|v2 (TikTokenizer needs it)
  std::int64_t tiktoken_num_special_tokens = 1000;
  std::vector<std::string> tiktoken_special_tokens;  // empty: <unk> <s> </s>

  std::string_view type_name() const { return enum_name(type); }
  // Which flags name the tokenizer's files: --vocab-file and --merge-file (GPT-2), none
  // (NullTokenizer), else --tokenizer-model.
  bool reads_vocab_and_merges() const { return type == TokenizerType::kGpt2Bpe; }
  bool reads_no_files() const { return type == TokenizerType::kNull; }
  // Whether the flags name its files (a NullTokenizer needs none).
  bool names_files() const;
  // Every file the options name exists (the tokenizer can be built from them).
  bool files_exist() const;
  // For messages: "--vocab-file V --merge-file M", "--tokenizer-type NullTokenizer --vocab-size N",
  // "--tokenizer-type T --tokenizer-model P".
  std::string describe() const;
  // The flags that choose this tokenizer on megatron_train's (or preprocess_data's) command line:
  // --tokenizer-type, its files or size, --vocab-extra-ids and TikTokenizer's settings.
  std::vector<std::string> flags() const;
  TokenizerIdentity identity() const;
  // Under Megatron's argument names (tokenizer_type, vocab_file, ...), as a run's saved arguments
  // hold them; reading takes any object that has them: an absent key, None or a value of another
  // type keeps the default (the type GPT2BPETokenizer); an unknown type name throws.
  nlohmann::json to_json() const;
  static TokenizerOptions from_json(const nlohmann::json& arguments);
};

// Megatron's NullTokenizer (current behaviour): text is whitespace-separated integer ids;
// vocab_size = --vocab-size, EOD = vocab_size - 1. For mock data and pre-tokenized corpora.
std::unique_ptr<Tokenizer> make_null_tokenizer(std::int64_t vocab_size);

// The --tokenizer-type names this build implements (kTokenizerTypeNames).
std::vector<std::string> supported_tokenizer_types();

// Builds the tokenizer; throws megatron::Error naming the flag or file that is wrong.
std::unique_ptr<Tokenizer> build_tokenizer(const TokenizerOptions& options);

}  // namespace megatron::tokenizer
