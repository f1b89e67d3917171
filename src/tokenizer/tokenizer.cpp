// Tokenizer conveniences and the --tokenizer-type factory (see tokenizer.h).
#include "megatron/tokenizer/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "megatron/core/check.h"
#include "megatron/tokenizer/gpt2_bpe_tokenizer.h"
#include "megatron/tokenizer/hf_tokenizer.h"
#include "megatron/tokenizer/sentencepiece_tokenizer.h"
#include "megatron/tokenizer/tiktoken_tokenizer.h"

namespace megatron::tokenizer {

std::vector<std::int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<std::int32_t> ids;
  make_encoder()->encode(text, ids);
  return ids;
}

std::string TextStream::add(std::int32_t id) {
  ids_.push_back(id);
  return take(false);
}

std::string TextStream::finish() { return take(true); }

std::string TextStream::take(bool last) {
  // Decoding everything again costs O(length) per token: nothing beside a model's forward step.
  const std::string text = tokenizer_.decode(ids_);
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::size_t final_bytes = text.size();
  while (!last && final_bytes >= emitted_ + kReplacement.size() &&
         std::string_view(text).substr(final_bytes - kReplacement.size()) == kReplacement) {
    final_bytes -= kReplacement.size();
  }
  if (final_bytes <= emitted_) return {};
  std::string piece = text.substr(emitted_, final_bytes - emitted_);
  emitted_ = final_bytes;
  return piece;
}

namespace {

class NullEncoder final : public Encoder {
 public:
  explicit NullEncoder(std::int64_t vocab_size) : vocab_size_(vocab_size) {}
  void encode(std::string_view text, std::vector<std::int32_t>& out) override {
    std::size_t pos = 0;
    while (pos < text.size()) {
      while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
      const std::size_t begin = pos;
      while (pos < text.size() && !std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
      if (pos == begin) break;
      const std::string word(text.substr(begin, pos - begin));
      std::size_t used = 0;
      long long id = -1;
      try {
        id = std::stoll(word, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      MEGATRON_CHECK(used == word.size() && id >= 0 && id < vocab_size_, "NullTokenizer: '", word,
                     "' is not a token id below --vocab-size ", vocab_size_);
      out.push_back(static_cast<std::int32_t>(id));
    }
  }

 private:
  std::int64_t vocab_size_;
};

class NullTokenizer final : public Tokenizer {
 public:
  explicit NullTokenizer(std::int64_t vocab_size) : vocab_size_(vocab_size) {}
  std::string type() const override { return "NullTokenizer"; }
  std::size_t vocab_size() const override { return static_cast<std::size_t>(vocab_size_); }
  std::int32_t eod() const override { return static_cast<std::int32_t>(vocab_size_ - 1); }
  std::unique_ptr<Encoder> make_encoder() const override { return std::make_unique<NullEncoder>(vocab_size_); }
  std::string decode(std::span<const std::int32_t> ids) const override {
    std::string out;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) out += ' ';
      out += std::to_string(ids[i]);
    }
    return out;
  }

 private:
  std::int64_t vocab_size_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_null_tokenizer(std::int64_t vocab_size) {
  MEGATRON_CHECK(vocab_size > 1 && vocab_size < (std::int64_t{1} << 31), "--tokenizer-type NullTokenizer needs "
                 "--vocab-size between 2 and 2^31 (got ", vocab_size, ")");
  return std::make_unique<NullTokenizer>(vocab_size);
}

std::vector<std::string> supported_tokenizer_types() {
  std::vector<std::string> types;
  for (const auto& entry : kTokenizerTypeNames) types.emplace_back(entry.name);
  return types;
}

TokenizerType parse_tokenizer_type(std::string_view name) {
  if (const auto type = parse_enum<TokenizerType>(name)) return *type;
  std::string supported;
  for (const auto& entry : kTokenizerTypeNames) supported += (supported.empty() ? "" : ", ") + std::string(entry.name);
  const bool known = std::find(std::begin(kMegatronTokenizerTypes), std::end(kMegatronTokenizerTypes), name) !=
                     std::end(kMegatronTokenizerTypes);
  MEGATRON_CHECK(!known, "--tokenizer-type ", name,
                 " is a Megatron tokenizer this build does not implement yet; supported: ", supported);
  MEGATRON_FAIL("--tokenizer-type ", name, " is not a Megatron tokenizer type; supported: ", supported);
}

bool is_sentencepiece(TokenizerType type) {
  return type == TokenizerType::kSentencePiece || type == TokenizerType::kGptSentencePiece ||
         type == TokenizerType::kLlama2;
}

std::unique_ptr<Tokenizer> build_tokenizer(const TokenizerOptions& options) {
  switch (options.type) {
    case TokenizerType::kGpt2Bpe:
      MEGATRON_CHECK(!options.vocab_file.empty(), "--tokenizer-type GPT2BPETokenizer needs --vocab-file");
      MEGATRON_CHECK(!options.merge_file.empty(), "--tokenizer-type GPT2BPETokenizer needs --merge-file");
      return Gpt2BpeTokenizer::from_files(options.vocab_file, options.merge_file);
    case TokenizerType::kNull: return make_null_tokenizer(options.vocab_size);
    case TokenizerType::kHuggingFace:
      MEGATRON_CHECK(!options.tokenizer_model.empty(),
                     "--tokenizer-type HuggingFaceTokenizer needs --tokenizer-model (a folder with tokenizer.json)");
      return make_hf_tokenizer(options.tokenizer_model);
    case TokenizerType::kTikToken: return make_tiktoken_tokenizer(tiktoken_options(options));
    case TokenizerType::kSentencePiece:
    case TokenizerType::kGptSentencePiece:
    case TokenizerType::kLlama2:
      return make_sentencepiece_tokenizer(options.type_name(), options.tokenizer_model, options.vocab_extra_ids);
  }
  MEGATRON_FAIL("internal error: tokenizer type ", static_cast<int>(options.type));
}

}  // namespace megatron::tokenizer
