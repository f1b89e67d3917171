// The shared module that holds the SentencePiece library (see sentencepiece_library.h for why it
// is a module): SentencePieceModel over sentencepiece::SentencePieceProcessor, and the exported
// loader. Links libsentencepiece only; catches everything, so no exception leaves the module.
#include <sentencepiece_processor.h>

#include <exception>

#include "sentencepiece_library.h"

namespace megatron::tokenizer {
namespace {

class Processor final : public SentencePieceModel {
 public:
  int piece_size() const override { return sp_.GetPieceSize(); }
  int bos_id() const override { return sp_.bos_id(); }
  int eos_id() const override { return sp_.eos_id(); }
  int pad_id() const override { return sp_.pad_id(); }
  int unk_id() const override { return sp_.unk_id(); }
  int piece_to_id(std::string_view piece) const override { return sp_.PieceToId(piece); }
  std::string id_to_piece(int id) const override { return sp_.IdToPiece(id); }

  std::string encode(std::string_view text, std::vector<int>& ids) const override {
    return message(sp_.Encode(text, &ids));
  }
  std::string decode(const std::vector<int>& ids, std::string& text) const override {
    return message(sp_.Decode(ids, &text));
  }

  std::string load(const char* bytes, std::size_t size) {
    return message(sp_.LoadFromSerializedProto(std::string_view(bytes, size)));
  }

 private:
  static std::string message(const sentencepiece::util::Status& status) {
    if (status.ok()) return {};
    std::string text = status.ToString();
    return text.empty() ? std::string("SentencePiece error") : text;
  }

  sentencepiece::SentencePieceProcessor sp_;
};

}  // namespace
}  // namespace megatron::tokenizer

extern "C" __attribute__((visibility("default"))) megatron::tokenizer::SentencePieceModel* megatron_sentencepiece_load(
    const char* bytes, std::size_t size, std::string* error) {
  try {
    auto model = std::make_unique<megatron::tokenizer::Processor>();
    *error = model->load(bytes, size);
    return error->empty() ? model.release() : nullptr;
  } catch (const std::exception& e) {
    *error = e.what();
  } catch (...) {
    *error = "unknown exception in SentencePiece";
  }
  return nullptr;
}
