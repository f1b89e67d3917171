// Megatron's SentencePiece tokenizers (see sentencepiece_tokenizer.h) over the SentencePiece
// library, opened from its own module (sentencepiece_library.h): the model loaded once and only
// read after; the special-token vocabulary, splitting and detokenising of Megatron's _SentencePieceTokenizer transcribed from core_v0.12.0's tokenizer.py.
// Text must be valid UTF-8 (Python strings always are); ids past the vocabulary are refused.
#include "megatron/tokenizer/sentencepiece_tokenizer.h"

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "megatron/core/check.h"
#include "megatron/core/file_io.h"
#include "megatron/tokenizer/unicode.h"
#include "sentencepiece_library.h"

namespace megatron::tokenizer {
namespace {

enum class Flavor { kSentencePiece, kGpt, kLlama2 };

struct SpecialToken {
  std::string text;
  std::int32_t id;
};

class SentencePieceTokenizer final : public Tokenizer {
 public:
  SentencePieceTokenizer(std::string type, Flavor flavor, std::unique_ptr<SentencePieceModel> sp, std::int64_t vocab_extra_ids);

  std::string type() const override { return type_; }
  std::size_t vocab_size() const override { return static_cast<std::size_t>(vocab_size_); }
  std::int32_t eod() const override { return eod_; }
  std::optional<std::int32_t> pad() const override {
    return pad_ >= 0 ? std::optional<std::int32_t>(pad_) : std::nullopt;
  }
  std::unique_ptr<Encoder> make_encoder() const override;
  std::string decode(std::span<const std::int32_t> ids) const override;

  Flavor flavor() const { return flavor_; }
  std::optional<std::int32_t> bos() const override {
    return bos_ >= 0 ? std::optional<std::int32_t>(bos_) : std::nullopt;
  }
  const std::vector<SpecialToken>& specials() const { return specials_; }
  SentencePieceSpecialTokens special_tokens() const;
  // SentencePiece's ids for `text` appended to `out`; `scratch` is the caller's buffer.
  void encode_piece(std::string_view text, std::vector<int>& scratch, std::vector<std::int32_t>& out) const;

 private:
  void add_special(const std::string& text);
  std::int32_t special_id(const std::string& text) const;
  // The text of a model piece, or `fallback` when `id` is not one (Megatron's IndexError branch).
  std::string piece_or(int id, const char* fallback) const;
  std::string decode_pieces(std::span<const std::int32_t> ids) const;

  std::string type_;
  Flavor flavor_;
  std::unique_ptr<SentencePieceModel> sp_;
  std::int32_t pieces_;      // the model's piece count N
  std::int32_t vocab_size_;  // N, plus the added special tokens for SentencePieceTokenizer
  std::int32_t eod_ = -1;
  std::int32_t bos_ = -1;
  std::int32_t pad_ = -1;
  // SentencePieceTokenizer only: the special tokens in Megatron's insertion order (that order breaks
  // ties between matches at one position), the set of their texts, and their text by id.
  std::vector<SpecialToken> specials_;
  std::unordered_set<std::string> special_texts_;
  std::unordered_map<std::int32_t, std::string> special_text_;
};

SentencePieceTokenizer::SentencePieceTokenizer(std::string type, Flavor flavor,
                                               std::unique_ptr<SentencePieceModel> sp, std::int64_t vocab_extra_ids)
    : type_(std::move(type)), flavor_(flavor), sp_(std::move(sp)), pieces_(sp_->piece_size()), vocab_size_(pieces_) {
  if (flavor_ != Flavor::kSentencePiece) {
    // _GPTSentencePieceTokenizer / _Llama2Tokenizer: the model's own ids; eod is eos_id.
    eod_ = sp_->eos_id();
    bos_ = sp_->bos_id();
    pad_ = sp_->pad_id();
    return;
  }
  // _SentencePieceTokenizer._initalize: each token gets the id of its piece, or the next free id.
  for (const char* text : {"<CLS>", "<SEP>", "<EOD>", "<MASK>"}) add_special(text);
  const std::string pad_text = piece_or(sp_->pad_id(), "<PAD>");
  add_special(pad_text);
  add_special(piece_or(sp_->bos_id(), "<BOS>"));
  add_special(piece_or(sp_->eos_id(), "<EOS>"));
  for (std::int64_t i = 0; i < vocab_extra_ids; ++i) add_special("<extra_id_" + std::to_string(i) + ">");
  eod_ = special_id("<EOD>");
  pad_ = special_id(pad_text);
  bos_ = special_id(piece_or(sp_->bos_id(), "<BOS>"));
}

std::int32_t SentencePieceTokenizer::special_id(const std::string& text) const {
  return std::find_if(specials_.begin(), specials_.end(), [&](const SpecialToken& s) { return s.text == text; })->id;
}

SentencePieceSpecialTokens SentencePieceTokenizer::special_tokens() const {
  SentencePieceSpecialTokens out;
  if (flavor_ != Flavor::kSentencePiece) {
    out.unk = piece_or(sp_->unk_id(), "");
    out.bos = piece_or(sp_->bos_id(), "");
    out.eos = piece_or(sp_->eos_id(), "");
    out.pad = piece_or(sp_->pad_id(), "");
    return out;
  }
  out.bos = piece_or(sp_->bos_id(), "<BOS>");
  out.eos = piece_or(sp_->eos_id(), "<EOS>");
  out.pad = piece_or(sp_->pad_id(), "<PAD>");
  for (const SpecialToken& s : specials_) out.added.emplace_back(s.text, s.id);
  return out;
}

std::string SentencePieceTokenizer::piece_or(int id, const char* fallback) const {
  return id >= 0 && id < pieces_ ? sp_->id_to_piece(id) : std::string(fallback);
}

void SentencePieceTokenizer::add_special(const std::string& text) {
  MEGATRON_ASSERT(!text.empty(), "SentencePiece refuses empty pieces");
  // Megatron's _special_tokens is a dict: a token added twice keeps its first place.
  if (!special_texts_.insert(text).second) return;
  // A piece's id (PieceToId answers unk_id for text that is not a piece; check it is this one).
  std::int32_t id = sp_->piece_to_id(text);
  if (id < 0 || id >= pieces_ || sp_->id_to_piece(id) != text) {
    id = vocab_size_++;
  }
  specials_.push_back({text, id});
  special_text_[id] = text;
}

void SentencePieceTokenizer::encode_piece(std::string_view text, std::vector<int>& scratch,
                                          std::vector<std::int32_t>& out) const {
  scratch.clear();
  const std::string error = sp_->encode(text, scratch);
  MEGATRON_CHECK(error.empty(), type_, ": SentencePiece could not encode a text (", error, ")");
  out.insert(out.end(), scratch.begin(), scratch.end());
}

std::string SentencePieceTokenizer::decode_pieces(std::span<const std::int32_t> ids) const {
  const std::vector<int> pieces(ids.begin(), ids.end());
  std::string text;
  const std::string error = sp_->decode(pieces, text);
  MEGATRON_CHECK(error.empty(), type_, ": SentencePiece could not decode (", error, ")");
  return text;
}

std::string SentencePieceTokenizer::decode(std::span<const std::int32_t> ids) const {
  for (const std::int32_t id : ids) {
    MEGATRON_CHECK(id >= 0 && id < vocab_size_, type_, ": token id ", id, " is outside the vocabulary of ",
                   vocab_size_);
  }
  std::string text;
  if (flavor_ != Flavor::kSentencePiece) {
    text = decode_pieces(ids);
  } else {
    // _SentencePieceTokenizer.detokenize: the pieces between special tokens decoded as one run
    // each, every special token written as its text, a space after each run before a special
    // token and after each special token.
    std::size_t last = 0;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const auto it = special_text_.find(ids[i]);
      if (it == special_text_.end()) continue;
      text += decode_pieces(ids.subspan(last, i - last));
      text += ' ';
      text += it->second;
      text += ' ';
      last = i + 1;
    }
    text += decode_pieces(ids.subspan(last));
  }
  return find_invalid_utf8(text) == std::string_view::npos ? text : utf8_replace_invalid(text);
}

class SentencePieceEncoder final : public Encoder {
 public:
  explicit SentencePieceEncoder(const SentencePieceTokenizer& tokenizer)
      : tokenizer_(tokenizer), next_(tokenizer.specials().size()) {}

  void encode(std::string_view text, std::vector<std::int32_t>& out) override {
    const std::size_t bad = find_invalid_utf8(text);
    MEGATRON_CHECK(bad == std::string_view::npos, tokenizer_.type(), ": invalid UTF-8 at byte ", bad, " of a ",
                   text.size(), "-byte text");
    switch (tokenizer_.flavor()) {
      case Flavor::kGpt:
        tokenizer_.encode_piece(text, scratch_, out);
        break;
      case Flavor::kLlama2:
        out.push_back(*tokenizer_.bos());
        tokenizer_.encode_piece(text, scratch_, out);
        break;
      case Flavor::kSentencePiece:
        encode_with_specials(text, out);
        break;
    }
  }

 private:
  // _SentencePieceTokenizer.tokenize: repeatedly the leftmost occurrence of any special token
  // after the position reached (min() over the dict: ties go to the token added first), the text
  // before it encoded alone, then its id. Python searches code points and this searches bytes:
  // both find the same places, since a UTF-8 token can only match valid UTF-8 at a character start.
  // Each token's next occurrence is remembered while it lies ahead, so a text is scanned once per
  // token rather than once per token per match.
  void encode_with_specials(std::string_view text, std::vector<std::int32_t>& out) {
    const auto& specials = tokenizer_.specials();
    constexpr std::size_t kUnknown = std::string_view::npos - 1;
    std::fill(next_.begin(), next_.end(), kUnknown);
    std::size_t at = 0;
    for (;;) {
      std::size_t best = specials.size();
      for (std::size_t k = 0; k < specials.size(); ++k) {
        if (next_[k] == kUnknown || (next_[k] != std::string_view::npos && next_[k] < at)) {
          next_[k] = text.find(specials[k].text, at);
        }
        if (next_[k] != std::string_view::npos && (best == specials.size() || next_[k] < next_[best])) best = k;
      }
      if (best == specials.size()) break;
      tokenizer_.encode_piece(text.substr(at, next_[best] - at), scratch_, out);
      out.push_back(specials[best].id);
      at = next_[best] + specials[best].text.size();
    }
    tokenizer_.encode_piece(text.substr(at), scratch_, out);
  }

  const SentencePieceTokenizer& tokenizer_;
  std::vector<int> scratch_;
  std::vector<std::size_t> next_;  // per special token: its next occurrence at or after the position, npos, or unknown
};

std::unique_ptr<Encoder> SentencePieceTokenizer::make_encoder() const {
  return std::make_unique<SentencePieceEncoder>(*this);
}

}  // namespace

std::unique_ptr<Tokenizer> make_sentencepiece_tokenizer(std::string_view type, const std::string& model_path,
                                                         std::int64_t vocab_extra_ids) {
  const TokenizerType kind = parse_tokenizer_type(type);
  MEGATRON_CHECK(is_sentencepiece(kind), "--tokenizer-type ", type, " is not a SentencePiece tokenizer type");
  const Flavor flavor = kind == TokenizerType::kSentencePiece      ? Flavor::kSentencePiece
                        : kind == TokenizerType::kGptSentencePiece ? Flavor::kGpt
                                                                   : Flavor::kLlama2;
  MEGATRON_CHECK(!model_path.empty(), "--tokenizer-type ", type,
                 " needs --tokenizer-model (the SentencePiece .model file)");
  MEGATRON_CHECK(vocab_extra_ids >= 0, "--vocab-extra-ids must be at least 0, got ", vocab_extra_ids);
  auto sp = load_sentencepiece_model(read_text_file(model_path, "--tokenizer-model"), model_path);
  MEGATRON_CHECK(vocab_extra_ids <= std::numeric_limits<std::int32_t>::max() - sp->piece_size() - 7,
                 "--vocab-extra-ids ", vocab_extra_ids, " is too large: the ids would pass 2^31");
  MEGATRON_CHECK(flavor != Flavor::kLlama2 || (sp->bos_id() >= 0 && sp->bos_id() < sp->piece_size()),
                 "--tokenizer-model ", model_path, " has no BOS piece (bos_id ", sp->bos_id(),
                 "); Llama2Tokenizer puts the BOS id before every text (Megatron would write id -1): use "
                 "GPTSentencePieceTokenizer");
  return std::make_unique<SentencePieceTokenizer>(std::string(type), flavor, std::move(sp), vocab_extra_ids);
}

SentencePieceSpecialTokens sentencepiece_special_tokens(const Tokenizer& tokenizer) {
  const auto* sp = dynamic_cast<const SentencePieceTokenizer*>(&tokenizer);
  MEGATRON_CHECK(sp != nullptr, "--tokenizer-type ", tokenizer.type(), " is not a SentencePiece tokenizer type");
  return sp->special_tokens();
}

}  // namespace megatron::tokenizer
