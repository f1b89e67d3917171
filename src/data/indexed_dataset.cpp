// IndexedDataset: reads and validates a Megatron `P.idx` / `P.bin` pair (spec 1.1-1.3).
// Both files stay mapped; the .idx arrays are read through unaligned views. Every check names
// the file it found wrong. Text datasets only (no multimodal modes).
#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>

#include "megatron/core/check.h"
#include "megatron/data/indexed_dataset.h"

namespace megatron::data {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the .idx/.bin formats are little-endian; big-endian hosts are not supported");

template <typename T>
T load_le(const std::uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

// Says how to call a prefix when the user passed a file name or a missing path.
void check_exists(const std::string& path, const std::string& prefix, const char* partner) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    check_readable_file(path, "dataset file");
    return;
  }
  std::string hint;
  const std::string_view p(prefix);
  if (p.ends_with(".bin") || p.ends_with(".idx")) {
    hint = str_cat("; a dataset is named by its prefix without the extension, e.g. '",
                   p.substr(0, p.size() - 4), "'");
  } else if (partner != nullptr && std::filesystem::exists(partner, ec)) {
    hint = str_cat(" (", partner, " exists; the pair is incomplete)");
  } else {
    hint = "; pass the dataset prefix P of an existing P.idx / P.bin pair";
  }
  MEGATRON_FAIL(path, " not found", hint);
}

// 34 + 12*S + 8*D, or false when that overflows 64 bits.
bool expected_index_size(std::uint64_t sequences, std::uint64_t documents, std::uint64_t* out) {
  std::uint64_t a = 0;
  std::uint64_t b = 0;
  if (__builtin_mul_overflow(sequences, std::uint64_t{12}, &a)) return false;
  if (__builtin_mul_overflow(documents, std::uint64_t{8}, &b)) return false;
  if (__builtin_add_overflow(a, b, out)) return false;
  return !__builtin_add_overflow(*out, std::uint64_t{kIndexHeaderBytes}, out);
}

// Validation reads the .idx in chunks of this many elements, dropping each chunk's pages after.
constexpr std::size_t kValidateChunk = std::size_t{1} << 20;

}  // namespace

std::string index_path(const std::string& prefix) { return prefix + ".idx"; }
std::string data_path(const std::string& prefix) { return prefix + ".bin"; }

IndexedDataset::IndexedDataset(const std::string& prefix) : prefix_(prefix) {
  const std::string idx = index_path(prefix);
  const std::string bin = data_path(prefix);
  check_exists(idx, prefix, bin.c_str());
  check_exists(bin, prefix, idx.c_str());

  load_index(idx);
  validate_index(idx);

  data_file_ = MappedFile(bin);
  const std::uint64_t expected = num_tokens_ * dtype_size(dtype_);
  const std::uint64_t actual = data_file_.size();
  MEGATRON_CHECK(actual >= expected, bin, ": truncated: ", idx, " describes ", num_tokens_,
                 " tokens of ", dtype_name(dtype_), " = ", expected, " bytes, but ", bin, " has ",
                 actual, " bytes");
  MEGATRON_CHECK(actual == expected, bin, ": ", actual - expected, " trailing bytes: ", idx,
                 " describes ", num_tokens_, " tokens of ", dtype_name(dtype_), " = ", expected,
                 " bytes, but ", bin, " has ", actual, " bytes");
}

void IndexedDataset::load_index(const std::string& idx) {
  index_file_ = MappedFile(idx);
  const std::uint8_t* p = index_file_.data();
  const std::uint64_t size = index_file_.size();

  const bool magic_ok =
      size >= sizeof(kIndexMagic) && std::memcmp(p, kIndexMagic, sizeof(kIndexMagic)) == 0;
  MEGATRON_CHECK(magic_ok, idx, ": not a Megatron indexed dataset index (bad magic); expected "
                 "the bytes 'MMIDIDX\\x00\\x00' that Megatron's preprocess_data.py writes");
  MEGATRON_CHECK(size >= kIndexHeaderBytes, idx, ": truncated: ", size,
                 " bytes, but the header alone is ", kIndexHeaderBytes, " bytes");

  const auto version = load_le<std::uint64_t>(p + 9);
  MEGATRON_CHECK(version == kIndexVersion, idx, ": unsupported index version ", version,
                 " (only version ", kIndexVersion, " exists)");
  const auto code = load_le<std::uint8_t>(p + 17);
  const std::optional<DType> dtype = dtype_from_code(code);
  MEGATRON_CHECK(dtype.has_value(), idx, ": unknown dtype code ", static_cast<int>(code),
                 " (known codes are 1..8)");
  dtype_ = *dtype;

  const auto sequences = load_le<std::uint64_t>(p + 18);
  const auto documents = load_le<std::uint64_t>(p + 26);
  std::uint64_t expected = 0;
  const bool representable = expected_index_size(sequences, documents, &expected);
  MEGATRON_CHECK(representable && size >= expected, idx, ": truncated: the header says ",
                 sequences, " sequences and ", documents, " document indices, which need ",
                 representable ? str_cat(expected) : std::string("more than 2^64"),
                 " bytes, but the file has ", size, " bytes");
  if (size != expected) {
    const std::uint64_t extra = size - expected;
    const std::string multimodal =
        extra == sequences ? " (one byte per sequence: this looks like a multimodal dataset, "
                             "which is not supported)"
                           : "";
    MEGATRON_FAIL(idx, ": ", extra, " trailing bytes: the header says ", sequences,
                  " sequences and ", documents, " document indices, which need ", expected,
                  " bytes, but the file has ", size, " bytes", multimodal);
  }
  MEGATRON_CHECK(documents >= 1, idx, ": the document index is empty; a valid index holds at "
                 "least [0]");

  const std::uint8_t* at = p + kIndexHeaderBytes;
  lengths_ = UnalignedArray<std::int32_t>::from_bytes(at, sequences);
  at += sequences * sizeof(std::int32_t);
  pointers_ = UnalignedArray<std::int64_t>::from_bytes(at, sequences);
  at += sequences * sizeof(std::int64_t);
  document_indices_ = UnalignedArray<std::int64_t>::from_bytes(at, documents);
}

void IndexedDataset::release_mapped_pages() const {
  // The maps are read-only and start on page boundaries: dropping pages loses nothing, a later
  // read faults them back in from the page cache.
  for (const MappedFile* file : {&index_file_, &data_file_}) {
    if (file->size() == 0) continue;
    ::madvise(const_cast<std::uint8_t*>(file->data()), file->size(), MADV_DONTNEED);
  }
}

std::uint64_t IndexedDataset::num_tokens(std::size_t begin, std::size_t end) const {
  MEGATRON_CHECK(begin <= end && end <= lengths_.size(), prefix_, ": sequences [", begin, ", ",
                 end, ") are out of range (the dataset has ", lengths_.size(), " sequences)");
  if (begin == end) return 0;
  // validate_index checked that the pointers are the running byte sum of the lengths.
  const auto last = static_cast<std::uint64_t>(pointers_[end - 1]) +
                    static_cast<std::uint64_t>(lengths_[end - 1]) * dtype_size(dtype_);
  return (last - static_cast<std::uint64_t>(pointers_[begin])) / dtype_size(dtype_);
}

void IndexedDataset::validate_index(const std::string& idx) {
  const auto sequences = static_cast<std::int64_t>(lengths_.size());
  const std::int64_t itemsize = static_cast<std::int64_t>(dtype_size(dtype_));
  std::int64_t offset = 0;
  std::uint64_t tokens = 0;
  for (std::size_t i = 0; i < lengths_.size(); ++i) {
    const std::int32_t length = lengths_[i];
    const std::int64_t pointer = pointers_[i];
    MEGATRON_CHECK(length >= 0, idx, ": sequence ", i, " has negative length ", length);
    MEGATRON_CHECK(pointer == offset, idx, ": sequence ", i, " points to byte ", pointer,
                   " of the .bin, but the lengths before it put it at byte ", offset);
    offset += static_cast<std::int64_t>(length) * itemsize;
    tokens += static_cast<std::uint64_t>(length);
    if ((i + 1) % kValidateChunk == 0) release_mapped_pages();
  }
  num_tokens_ = tokens;

  const UnalignedArray<std::int64_t> doc = document_indices_;
  MEGATRON_CHECK(doc.front() == 0, idx, ": the document index starts at ", doc.front(),
                 " instead of 0");
  std::int64_t previous = 0;
  for (std::size_t d = 1; d < doc.size(); ++d) {
    const std::int64_t current = doc[d];
    MEGATRON_CHECK(current >= previous, idx, ": the document index decreases at document ",
                   d - 1, " (", previous, " then ", current, ")");
    previous = current;
    if (d % kValidateChunk == 0) release_mapped_pages();
  }
  MEGATRON_CHECK(doc.back() == sequences, idx, ": the document index ends at ", doc.back(),
                 " but there are ", sequences, " sequences");
  release_mapped_pages();
}

std::span<const std::uint8_t> IndexedDataset::bin_bytes() const {
  return {data_file_.data(), static_cast<std::size_t>(data_file_.size())};
}

std::span<const std::uint8_t> IndexedDataset::sequence_bytes(std::size_t sequence) const {
  MEGATRON_CHECK(sequence < lengths_.size(), prefix_, ": sequence ", sequence,
                 " is out of range (the dataset has ", lengths_.size(), " sequences)");
  const std::size_t bytes = static_cast<std::size_t>(lengths_[sequence]) * dtype_size(dtype_);
  return {data_file_.data() + pointers_[sequence], bytes};
}

std::vector<std::int64_t> IndexedDataset::read_sequence(std::size_t sequence, std::size_t offset,
                                                        std::size_t length) const {
  const std::span<const std::uint8_t> bytes = sequence_bytes(sequence);
  const auto size = static_cast<std::size_t>(lengths_[sequence]);
  MEGATRON_CHECK(offset <= size, prefix_, ": offset ", offset, " is past the end of sequence ",
                 sequence, " (", size, " tokens)");
  const std::size_t count = std::min(length, size - offset);
  std::vector<std::int64_t> out(count);
  visit_dtype(dtype_, [&](auto zero) {
    using T = decltype(zero);
    const std::uint8_t* src = bytes.data() + offset * sizeof(T);
    for (std::size_t i = 0; i < count; ++i) {
      out[i] = static_cast<std::int64_t>(load_le<T>(src + i * sizeof(T)));
    }
  });
  return out;
}

std::vector<std::int64_t> IndexedDataset::read_document(std::size_t document) const {
  MEGATRON_CHECK(document < num_documents(), prefix_, ": document ", document,
                 " is out of range (the dataset has ", num_documents(), " documents)");
  const auto first = static_cast<std::size_t>(document_indices_[document]);
  const auto last = static_cast<std::size_t>(document_indices_[document + 1]);
  std::size_t total = 0;
  for (std::size_t s = first; s < last; ++s) total += static_cast<std::size_t>(lengths_[s]);
  std::vector<std::int64_t> out;
  out.reserve(total);
  for (std::size_t s = first; s < last; ++s) {
    const std::vector<std::int64_t> tokens = read_sequence(s);
    out.insert(out.end(), tokens.begin(), tokens.end());
  }
  return out;
}

}  // namespace megatron::data
