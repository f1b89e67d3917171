// GPT-2's byte-level BPE (Megatron's GPT2BPETokenizer, spec 3.1): vocab.json + merges.txt,
// pre-tokenizer regex, byte-to-unicode alphabet, lowest-rank-first merges. `<|endoftext|>` in
// text is ordinary text; its id is the EOD. Ids match the reference encoder exactly.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "megatron/tokenizer/tokenizer.h"

namespace megatron::tokenizer {

class Gpt2BpeTokenizer final : public Tokenizer {
 public:
  static constexpr const char* kTypeName = "GPT2BPETokenizer";
  static constexpr const char* kEndOfText = "<|endoftext|>";

  // Reads and validates both files; errors name the file (and line, for merges).
  static std::unique_ptr<Gpt2BpeTokenizer> from_files(const std::string& vocab_file,
                                                      const std::string& merge_file);
  // From the files' contents; `vocab_origin` / `merges_origin` name them in errors.
  Gpt2BpeTokenizer(std::string_view vocab_json, std::string_view merges_text,
                   const std::string& vocab_origin, const std::string& merges_origin);
  ~Gpt2BpeTokenizer() override;

  std::string type() const override { return kTypeName; }
  std::size_t vocab_size() const override { return vocab_size_; }
  std::int32_t eod() const override { return eod_; }
  std::unique_ptr<Encoder> make_encoder() const override;
  std::string decode(std::span<const std::int32_t> ids) const override;

  // BPE of one pre-tokenized piece, appended to `out` (no cache). Long pieces use a heap, pieces
  // over kMaxHeapPiece bytes bpe_low_memory(); all paths give the lowest-rank-first,
  // all-occurrences-per-round result of the reference.
  void bpe(std::string_view piece, std::vector<std::int32_t>& out) const;
  // The path for very long pieces (a whitespace-free run of megabytes): about 8 bytes of memory
  // per byte of the piece (the heap path takes about 50), O(n log n) time. Public for tests.
  void bpe_low_memory(std::string_view piece, std::vector<std::int32_t>& out) const;
  static constexpr std::size_t kMaxHeapPiece = 4096;
  // The plain quadratic algorithm, as written in the reference; for tests.
  void bpe_reference(std::string_view piece, std::vector<std::int32_t>& out) const;

  // Id of a token given as raw bytes, or -1.
  std::int32_t token_id(std::string_view token_bytes) const;
  // Raw bytes of a token id (checked).
  const std::string& token_bytes(std::int32_t id) const;
  std::size_t num_merges() const { return num_merges_; }

 private:
  struct MergeTable;  // (left, right) -> (rank, result symbol)

  std::int32_t merge_rank(std::int32_t left, std::int32_t right, std::int32_t& result) const;
  std::int32_t intern_symbol(const std::string& bytes);
  void bpe_small(std::string_view piece, std::vector<std::int32_t>& out) const;
  void bpe_heap(std::string_view piece, std::vector<std::int32_t>& out) const;
  void emit(std::int32_t symbol, std::string_view piece, std::vector<std::int32_t>& out) const;

  std::size_t vocab_size_ = 0;
  std::int32_t eod_ = -1;
  std::int32_t num_vocab_ids_ = 0;  // symbols below this are real vocabulary ids
  std::size_t num_merges_ = 0;
  std::unordered_map<std::string, std::int32_t> symbol_ids_;  // bytes -> symbol
  std::vector<std::string> symbol_bytes_;                     // symbol -> bytes
  std::vector<bool> is_vocab_id_;                             // symbol < num_vocab_ids_ in use
  std::array<std::int32_t, 256> byte_symbol_{};
  std::unique_ptr<MergeTable> merges_;
};

// GPT-2's byte <-> unicode alphabet (spec 3.1): printable bytes map to themselves, the other 68
// to U+0100.. in byte order.
std::array<char32_t, 256> gpt2_byte_to_unicode();
// A token spelled in that alphabet, as raw bytes; false if a character is outside it.
bool gpt2_alphabet_to_bytes(std::string_view token, std::string& bytes);

}  // namespace megatron::tokenizer
