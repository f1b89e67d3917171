// The SentencePiece library as the tokenizers see it: a loaded model behind an interface, built in
// its own shared module (sentencepiece_module.cpp -> libmegatron_sentencepiece.so) and opened with
// dlopen on first use.
//
// Why a module: Debian's libsentencepiece.so.0 carries its own copy of protobuf-lite and exports
// its symbols. A process that also loads libprotobuf.so (the TensorBoard writer) binds both
// libraries to one set of protobuf symbols and crashes in static initialisation, before main, in
// every binary linking both, whether or not a SentencePiece model is ever read. Opened with
// RTLD_LOCAL | RTLD_DEEPBIND, the module and libsentencepiece bind to their own protobuf first,
// and nothing is loaded at all by the processes that never ask for a SentencePiece type.
//
// The interface has only inline code, so the module links SentencePiece and nothing of this
// project; nothing is thrown across it (errors come back as text).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace megatron::tokenizer {

class SentencePieceModel {
 public:
  virtual ~SentencePieceModel() = default;
  virtual int piece_size() const = 0;
  virtual int bos_id() const = 0;  // -1 when the model has none
  virtual int eos_id() const = 0;
  virtual int pad_id() const = 0;
  virtual int unk_id() const = 0;
  virtual int piece_to_id(std::string_view piece) const = 0;  // the unknown id for a non-piece
  virtual std::string id_to_piece(int id) const = 0;
  // SentencePieceProcessor::Encode / Decode with default options; "" on success, else the
  // library's message. Const and thread-safe, as the library's are.
  virtual std::string encode(std::string_view text, std::vector<int>& ids) const = 0;
  virtual std::string decode(const std::vector<int>& ids, std::string& text) const = 0;
};

// The module's one exported function: a model parsed from the bytes of a .model file, or null with
// the library's message in `error`.
using SentencePieceLoadFn = SentencePieceModel* (*)(const char* bytes, std::size_t size, std::string* error);
inline constexpr const char* kSentencePieceLoadSymbol = "megatron_sentencepiece_load";

// Opens the module (once per process; sentencepiece_loader.cpp) and loads a model from `bytes`;
// `source` names the file in errors. Throws megatron::Error when the module cannot be opened (the
// message says where it was looked for) or the bytes are not a model (the library's reason).
std::unique_ptr<SentencePieceModel> load_sentencepiece_model(const std::string& bytes, const std::string& source);

}  // namespace megatron::tokenizer
