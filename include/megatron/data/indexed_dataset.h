// Megatron's mmap indexed dataset (`P.idx` + `P.bin`, spec section 1): a reader that validates
// and maps both files (the .idx arrays read through unaligned views), and a writer that streams
// token ids into `.bin` and writes `.idx` at the end. Both files are written under temporary
// names and appear together only when finalize() succeeds. Text datasets only: the multimodal
// "modes" array is not supported.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "megatron/core/file_io.h"
#include "megatron/data/dtype.h"
#include "megatron/data/unaligned_array.h"

namespace megatron::data {

inline constexpr char kIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
inline constexpr std::uint64_t kIndexVersion = 1;
inline constexpr std::size_t kIndexHeaderBytes = 34;

std::string index_path(const std::string& prefix);  // prefix + ".idx"
std::string data_path(const std::string& prefix);   // prefix + ".bin"

class IndexedDataset {
 public:
  // Maps P.idx and P.bin. The .idx arrays stay in the page cache (shared by every process
  // that opens the dataset); validating them touches every page once, then drops them from
  // this process's resident set, so memory does not grow with the number of documents.
  // Throws megatron::Error naming the file and the problem: missing file, bad magic (not a
  // Megatron index), unsupported version or dtype code, a size that disagrees
  // with the header (truncated or trailing bytes), document indices that do not start at 0, are
  // not monotonic or do not end at the sequence count, negative lengths, pointers that are not
  // the running sum of the lengths, and a .bin whose size is not exactly the tokens' bytes.
  explicit IndexedDataset(const std::string& prefix);

  const std::string& prefix() const { return prefix_; }
  DType dtype() const { return dtype_; }
  std::size_t num_sequences() const { return lengths_.size(); }
  std::size_t num_documents() const { return document_indices_.size() - 1; }
  std::uint64_t num_tokens() const { return num_tokens_; }
  // Tokens in sequences [begin, end), from the pointers (no pass over the lengths).
  std::uint64_t num_tokens(std::size_t begin, std::size_t end) const;

  // Views into the mapped .idx (valid while this dataset lives).
  UnalignedArray<std::int32_t> sequence_lengths() const { return lengths_; }
  UnalignedArray<std::int64_t> sequence_pointers() const { return pointers_; }
  // [0, e1, ..., num_sequences]: document d spans sequences [doc[d], doc[d+1]).
  UnalignedArray<std::int64_t> document_indices() const { return document_indices_; }
  // Drops the .idx and .bin pages this process has read from its resident set (they stay in
  // the page cache); for passes over every token or document, such as dataset_info's.
  void release_mapped_pages() const;

  // Raw bytes of the .bin file and of one sequence.
  std::span<const std::uint8_t> bin_bytes() const;
  std::span<const std::uint8_t> sequence_bytes(std::size_t sequence) const;

  // Token ids of a sequence (offset/length in tokens within it), widened to int64.
  std::vector<std::int64_t> read_sequence(std::size_t sequence, std::size_t offset = 0,
                                          std::size_t length = SIZE_MAX) const;
  // All token ids of a document, its sequences concatenated.
  std::vector<std::int64_t> read_document(std::size_t document) const;

 private:
  void load_index(const std::string& idx_path);
  void validate_index(const std::string& idx_path);

  std::string prefix_;
  MappedFile index_file_;
  MappedFile data_file_;
  DType dtype_ = DType::kUInt16;
  // Into index_file_: its arrays start at byte 34, at unaligned addresses.
  UnalignedArray<std::int32_t> lengths_;
  UnalignedArray<std::int64_t> pointers_;
  UnalignedArray<std::int64_t> document_indices_;
  std::uint64_t num_tokens_ = 0;
};

class IndexedDatasetWriter {
 public:
  // Creates temporaries next to P.bin / P.idx; nothing appears under the final names until
  // finalize(). Destroying an unfinalized writer removes the temporaries.
  IndexedDatasetWriter(std::string prefix, DType dtype);

  // One document made of sequences: `tokens` concatenated, `sequence_lengths` summing to its
  // size. An empty document (no sequences) is recorded as a zero-sequence document. Token ids
  // must fit the dtype (checked).
  void add_document(std::span<const std::int32_t> tokens,
                    UnalignedArray<std::int32_t> sequence_lengths);
  // Appends every document of another dataset (Megatron's add_index); dtypes must match.
  void add_index(const IndexedDataset& other);

  // Writes .idx, fsyncs both files and renames them into place (.bin first, .idx last).
  void finalize();

  DType dtype() const { return dtype_; }
  std::uint64_t num_documents() const { return document_indices_.size() - 1; }
  std::uint64_t num_sequences() const { return lengths_.size(); }
  std::uint64_t num_tokens() const { return num_tokens_; }

 private:
  std::string prefix_;
  DType dtype_;
  std::unique_ptr<AtomicFile> bin_;
  std::unique_ptr<AtomicFile> idx_;
  std::vector<std::int32_t> lengths_;
  std::vector<std::int64_t> document_indices_{0};
  std::uint64_t num_tokens_ = 0;
  std::vector<std::uint8_t> scratch_;
  bool finalized_ = false;
};

// tools/merge_datasets.py: every `X.bin`/`X.idx` pair in `input_dir` (each prefix must have
// both files), prefixes sorted lexicographically, appended in that order into `output_prefix`
// with the first dataset's dtype. Returns the prefixes merged, in order.
std::vector<std::string> merge_datasets(const std::string& input_dir,
                                        const std::string& output_prefix);

}  // namespace megatron::data
