// The per-thread GPT-2 encoder: pre-tokenize, then BPE each piece through a bounded cache.
// Single bytes skip BPE entirely.
#include <algorithm>

#include "flat_hash.h"
#include "megatron/tokenizer/gpt2_bpe_tokenizer.h"
#include "megatron/tokenizer/pretokenizer.h"

namespace megatron::tokenizer {
namespace {

class Gpt2BpeEncoder final : public Encoder {
 public:
  explicit Gpt2BpeEncoder(const Gpt2BpeTokenizer& tokenizer) : tokenizer_(tokenizer) {
    // -1 for a byte the vocabulary lacks: bpe() then reports it.
    for (int b = 0; b < 256; ++b) single_byte_[b] = tokenizer_.token_id(std::string(1, static_cast<char>(b)));
  }

  void encode(std::string_view text, std::vector<std::int32_t>& out) override {
    pretokenize(text, [&](std::string_view piece) {
      if (piece.size() == 1 && single_byte_[static_cast<unsigned char>(piece[0])] >= 0) {
        out.push_back(single_byte_[static_cast<unsigned char>(piece[0])]);
        return;
      }
      cache_.encode_through(piece, out,
                            [&](std::string_view p, std::vector<std::int32_t>& ids) { tokenizer_.bpe(p, ids); });
    });
  }

 private:
  const Gpt2BpeTokenizer& tokenizer_;
  PieceCache cache_;
  std::array<std::int32_t, 256> single_byte_{};
};

}  // namespace

std::unique_ptr<Encoder> Gpt2BpeTokenizer::make_encoder() const {
  return std::make_unique<Gpt2BpeEncoder>(*this);
}

}  // namespace megatron::tokenizer
