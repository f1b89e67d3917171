// The tokenizer interface every tool and the trainer use, and the factory that maps Megatron's
// --tokenizer-type names to implementations. A Tokenizer is immutable and shared between
// threads; each thread encodes through its own Encoder (which may cache).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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

// Megatron's tokenizer flags (spec 6.8) that the implemented types read.
struct TokenizerOptions {
  std::string type = "GPT2BPETokenizer";
  std::string vocab_file;
  std::string merge_file;
  std::int64_t vocab_size = 0;  // --vocab-size: NullTokenizer's size; TikTokenizer's cut (0: 131072)
  std::string tokenizer_model;  // --tokenizer-model: TikTokenizer's vocabulary .json; SentencePiece's .model
  std::int64_t vocab_extra_ids = 0;  // --vocab-extra-ids: SentencePieceTokenizer's <extra_id_i> tokens
  std::string tiktoken_pattern;  // --tiktoken-pattern v1|v2 (TikTokenizer needs it)
  std::int64_t tiktoken_num_special_tokens = 1000;
  std::vector<std::string> tiktoken_special_tokens;  // empty: <unk> <s> </s>
};

// Megatron's NullTokenizer (current behaviour): text is whitespace-separated integer ids;
// vocab_size = --vocab-size, EOD = vocab_size - 1. For mock data and pre-tokenized corpora.
std::unique_ptr<Tokenizer> make_null_tokenizer(std::int64_t vocab_size);

// The --tokenizer-type names this build implements.
std::vector<std::string> supported_tokenizer_types();

// Builds the tokenizer; throws megatron::Error naming the flag or file that is wrong, and says so
// when the type is a Megatron type this project does not implement yet.
std::unique_ptr<Tokenizer> build_tokenizer(const TokenizerOptions& options);

}  // namespace megatron::tokenizer
