// IndexedDataset / IndexedDatasetWriter: round trips in every dtype, byte parity with the
// Megatron-made golden dataset (through add_index and add_document), and the reader's rejection
// of every kind of damaged or foreign file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <ranges>

#include "megatron/core/check.h"
#include "megatron/data/indexed_dataset.h"
#include "test_support.h"

namespace megatron::data {
namespace {

namespace fs = std::filesystem;
using megatron::testing::error_of;
using megatron::testing::expect_contains;
using megatron::testing::read_file_bytes;
using megatron::testing::TempDir;

const std::string kGolden = megatron::testing::golden_dataset_prefix();

struct Doc {
  std::vector<std::int32_t> tokens;
  std::vector<std::int32_t> lengths;
};

// Three documents: two sequences, empty, one sequence.
const std::vector<Doc> kSmallDocs = {{{1, 2, 3}, {2, 1}}, {{}, {}}, {{4, 5}, {2}}};

void write_dataset(const std::string& prefix, DType dtype, const std::vector<Doc>& docs) {
  IndexedDatasetWriter writer(prefix, dtype);
  for (const Doc& doc : docs) writer.add_document(doc.tokens, doc.lengths);
  writer.finalize();
}

std::vector<std::int64_t> widen(const std::vector<std::int32_t>& ids) {
  return {ids.begin(), ids.end()};
}

void expect_same_documents(const IndexedDataset& dataset, const std::vector<Doc>& docs) {
  ASSERT_EQ(dataset.num_documents(), docs.size());
  std::size_t sequence = 0;
  for (std::size_t d = 0; d < docs.size(); ++d) {
    EXPECT_EQ(dataset.read_document(d), widen(docs[d].tokens)) << "document " << d;
    EXPECT_EQ(dataset.document_indices()[d], static_cast<std::int64_t>(sequence));
    for (const std::int32_t length : docs[d].lengths) {
      EXPECT_EQ(dataset.sequence_lengths()[sequence++], length);
    }
  }
  EXPECT_EQ(dataset.num_sequences(), sequence);
}

TEST(IndexedDataset, RoundTripsEmptyAndMultiSequenceDocumentsAsUint16) {
  TempDir dir;
  const std::vector<Doc> docs = {
      {{0, 65535, 7}, {1, 2}}, {{}, {}}, {{}, {}}, {{9}, {1}}, {{1, 2, 3, 4}, {1, 0, 3}}};
  write_dataset(dir / "ds", DType::kUInt16, docs);
  const IndexedDataset dataset(dir / "ds");
  EXPECT_EQ(dataset.dtype(), DType::kUInt16);
  EXPECT_EQ(dataset.num_tokens(), 8u);
  EXPECT_EQ(dataset.num_sequences(), 6u);
  expect_same_documents(dataset, docs);
  EXPECT_EQ(dataset.read_sequence(0), (std::vector<std::int64_t>{0}));
  EXPECT_EQ(dataset.read_sequence(1), (std::vector<std::int64_t>{65535, 7}));
  EXPECT_EQ(dataset.read_sequence(5, 1), (std::vector<std::int64_t>{3, 4}));
  EXPECT_EQ(dataset.read_sequence(5, 1, 1), (std::vector<std::int64_t>{3}));
  EXPECT_EQ(dataset.read_sequence(4).size(), 0u);
  EXPECT_EQ(dataset.bin_bytes().size(), 16u);
}

TEST(IndexedDataset, RoundTripsInt32IdsBeyondUint16) {
  TempDir dir;
  const std::vector<Doc> docs = {{{100000, -5, 2147483647}, {3}}, {{0}, {1}}};
  write_dataset(dir / "ds", DType::kInt32, docs);
  const IndexedDataset dataset(dir / "ds");
  EXPECT_EQ(dataset.dtype(), DType::kInt32);
  expect_same_documents(dataset, docs);
  EXPECT_EQ(dataset.sequence_pointers()[1], 12);
}

TEST(IndexedDataset, RoundTripsEveryDtype) {
  for (const std::uint8_t code : {1, 2, 3, 4, 5, 6, 7, 8}) {
    const DType dtype = *dtype_from_code(code);
    TempDir dir;
    const std::vector<Doc> docs = {{{0, 1, 100, 127}, {3, 1}}, {{}, {}}, {{42}, {1}}};
    write_dataset(dir / "ds", dtype, docs);
    const IndexedDataset dataset(dir / "ds");
    EXPECT_EQ(dataset.dtype(), dtype);
    EXPECT_EQ(dataset.bin_bytes().size(), 5 * dtype_size(dtype)) << dtype_name(dtype);
    expect_same_documents(dataset, docs);
  }
}

TEST(IndexedDataset, WritesTheSpecifiedByteLayout) {
  TempDir dir;
  write_dataset(dir / "ds", DType::kUInt16, kSmallDocs);
  std::string expected("MMIDIDX\0\0", 9);
  const auto append = [&](auto value) {
    expected.append(reinterpret_cast<const char*>(&value), sizeof(value));
  };
  append(std::uint64_t{1});
  append(std::uint8_t{8});
  append(std::uint64_t{3});  // sequences
  append(std::uint64_t{4});  // document indices
  for (std::int32_t length : {2, 1, 2}) append(length);
  for (std::int64_t pointer : {0, 4, 6}) append(pointer);
  for (std::int64_t doc : {0, 2, 2, 3}) append(doc);
  EXPECT_EQ(read_file_bytes(dir / "ds.idx"), expected);
  EXPECT_EQ(read_file_bytes(dir / "ds.bin"), std::string("\1\0\2\0\3\0\4\0\5\0", 10));
}

TEST(IndexedDataset, ReadsTheGoldenMegatronDataset) {
  const IndexedDataset golden(kGolden);
  EXPECT_EQ(golden.dtype(), DType::kUInt16);
  EXPECT_EQ(golden.num_documents(), 525u);
  EXPECT_EQ(golden.num_sequences(), 3803u);
  EXPECT_EQ(golden.num_tokens(), 3693760u);
  EXPECT_EQ(golden.document_indices().back(), 3803);
}

TEST(IndexedDatasetWriter, AddIndexReproducesGoldenBytes) {
  TempDir dir;
  const IndexedDataset golden(kGolden);
  IndexedDatasetWriter writer(dir / "copy", golden.dtype());
  writer.add_index(golden);
  writer.finalize();
  EXPECT_EQ(read_file_bytes(dir / "copy.idx"), read_file_bytes(kGolden + ".idx"));
  EXPECT_EQ(read_file_bytes(dir / "copy.bin"), read_file_bytes(kGolden + ".bin"));
}

TEST(IndexedDatasetWriter, AddDocumentReproducesGoldenBytes) {
  TempDir dir;
  const IndexedDataset golden(kGolden);
  IndexedDatasetWriter writer(dir / "copy", golden.dtype());
  const auto docs = golden.document_indices();
  const auto lengths = golden.sequence_lengths();
  for (std::size_t d = 0; d < golden.num_documents(); ++d) {
    const std::vector<std::int64_t> ids = golden.read_document(d);
    const std::vector<std::int32_t> tokens(ids.begin(), ids.end());
    writer.add_document(tokens, lengths.subspan(docs[d], docs[d + 1] - docs[d]));
  }
  EXPECT_EQ(writer.num_documents(), 525u);
  EXPECT_EQ(writer.num_tokens(), golden.num_tokens());
  writer.finalize();
  EXPECT_EQ(read_file_bytes(dir / "copy.idx"), read_file_bytes(kGolden + ".idx"));
  EXPECT_EQ(read_file_bytes(dir / "copy.bin"), read_file_bytes(kGolden + ".bin"));
}

TEST(IndexedDatasetWriter, LeavesNoFilesWhenDestroyedWithoutFinalize) {
  TempDir dir;
  {
    IndexedDatasetWriter writer(dir / "ds", DType::kUInt16);
    writer.add_document(kSmallDocs[0].tokens, kSmallDocs[0].lengths);
    EXPECT_EQ(dir.files().size(), 2u);  // the two temporaries
  }
  EXPECT_TRUE(dir.files().empty());
}

TEST(IndexedDatasetWriter, LeavesOnlyTheFinalFilesAfterFinalize) {
  TempDir dir;
  write_dataset(dir / "ds", DType::kUInt16, kSmallDocs);
  EXPECT_EQ(dir.files(), (std::vector<std::string>{"ds.bin", "ds.idx"}));
}

TEST(IndexedDatasetWriter, RejectsIdsOutsideUint16AndKeepsTheDocumentOut) {
  TempDir dir;
  IndexedDatasetWriter writer(dir / "ds", DType::kUInt16);
  const std::vector<std::int32_t> too_big = {1, 65536};
  const std::vector<std::int32_t> negative = {-1};
  expect_contains(error_of([&] { writer.add_document(too_big, std::vector<std::int32_t>{2}); }),
                  {"65536", "uint16"});
  expect_contains(error_of([&] { writer.add_document(negative, std::vector<std::int32_t>{1}); }),
                  {"-1", "uint16"});
  writer.add_document(kSmallDocs[2].tokens, kSmallDocs[2].lengths);
  writer.finalize();
  const IndexedDataset dataset(dir / "ds");
  expect_same_documents(dataset, {kSmallDocs[2]});
}

TEST(IndexedDatasetWriter, RejectsLengthsThatDoNotSumToTheTokens) {
  TempDir dir;
  IndexedDatasetWriter writer(dir / "ds", DType::kInt32);
  const std::vector<std::int32_t> tokens = {1, 2, 3};
  expect_contains(error_of([&] { writer.add_document(tokens, std::vector<std::int32_t>{2}); }),
                  {"3 tokens", "sum to 2"});
}

TEST(IndexedDatasetWriter, AddIndexRejectsDtypeMismatch) {
  TempDir dir;
  write_dataset(dir / "wide", DType::kInt32, kSmallDocs);
  const IndexedDataset wide(dir / "wide");
  IndexedDatasetWriter writer(dir / "out", DType::kUInt16);
  expect_contains(error_of([&] { writer.add_index(wide); }), {"wide.idx", "int32", "uint16"});
}

TEST(IndexedDatasetWriter, RejectsMissingOutputFolder) {
  TempDir dir;
  expect_contains(error_of([&] { IndexedDatasetWriter(dir / "nope/ds", DType::kUInt16); }),
                  {"nope", "does not exist"});
}

// Damaging a valid small dataset (S = 3, D = 4: lengths at 34, pointers at 46, docs at 70).
class DamagedDataset : public ::testing::Test {
 protected:
  void SetUp() override {
    write_dataset(prefix_, DType::kUInt16, kSmallDocs);
    idx_ = read_file_bytes(prefix_ + ".idx");
    bin_ = read_file_bytes(prefix_ + ".bin");
  }
  std::string open_error() {
    dir_.write("ds.idx", idx_);
    dir_.write("ds.bin", bin_);
    return error_of([&] { IndexedDataset dataset(prefix_); });
  }
  template <typename T>
  void put(std::size_t offset, T value) {
    std::memcpy(idx_.data() + offset, &value, sizeof(T));
  }

  TempDir dir_;
  std::string prefix_ = dir_ / "ds";
  std::string idx_;
  std::string bin_;
};

TEST_F(DamagedDataset, RejectsBadMagic) {
  idx_[3] = 'X';
  expect_contains(open_error(), {prefix_ + ".idx", "bad magic"});
}

TEST_F(DamagedDataset, RejectsForeignTextFile) {
  idx_ = "{\"text\": \"this is a jsonl file, not an index\"}\n";
  expect_contains(open_error(), {prefix_ + ".idx", "not a Megatron indexed dataset index"});
}

TEST_F(DamagedDataset, RejectsTinyFile) {
  idx_ = "MMI";
  expect_contains(open_error(), {prefix_ + ".idx", "bad magic"});
}

TEST_F(DamagedDataset, RejectsBadVersion) {
  put<std::uint64_t>(9, 2);
  expect_contains(open_error(), {prefix_ + ".idx", "version 2"});
}

TEST_F(DamagedDataset, RejectsUnknownDtypeCode) {
  put<std::uint8_t>(17, 9);
  expect_contains(open_error(), {prefix_ + ".idx", "dtype code 9"});
}

TEST_F(DamagedDataset, RejectsTruncatedHeader) {
  idx_.resize(20);
  expect_contains(open_error(), {prefix_ + ".idx", "truncated"});
}

TEST_F(DamagedDataset, RejectsTruncatedIndex) {
  idx_.pop_back();
  expect_contains(open_error(), {prefix_ + ".idx", "truncated", "need 102 bytes", "has 101"});
}

TEST_F(DamagedDataset, RejectsTrailingIndexBytes) {
  idx_ += "xy";
  expect_contains(open_error(), {prefix_ + ".idx", "2 trailing bytes", "need 102", "has 104"});
}

TEST_F(DamagedDataset, SaysMultimodalWhenOneTrailingBytePerSequence) {
  idx_ += std::string(3, '\0');
  expect_contains(open_error(), {prefix_ + ".idx", "multimodal"});
}

TEST_F(DamagedDataset, RejectsTruncatedData) {
  bin_.resize(bin_.size() - 2);
  expect_contains(open_error(), {prefix_ + ".bin", "truncated", "10 bytes", "has 8 bytes"});
}

TEST_F(DamagedDataset, RejectsTrailingDataBytes) {
  bin_ += "zz";
  expect_contains(open_error(), {prefix_ + ".bin", "2 trailing bytes"});
}

TEST_F(DamagedDataset, RejectsNegativeLength) {
  put<std::int32_t>(34 + 4, -1);
  expect_contains(open_error(), {prefix_ + ".idx", "sequence 1", "negative length"});
}

TEST_F(DamagedDataset, RejectsPointersThatDisagreeWithLengths) {
  put<std::int64_t>(46 + 8 * 2, 8);
  expect_contains(open_error(), {prefix_ + ".idx", "sequence 2 points to byte 8", "at byte 6"});
}

TEST_F(DamagedDataset, RejectsDocumentIndexNotStartingAtZero) {
  put<std::int64_t>(70, 1);
  expect_contains(open_error(), {prefix_ + ".idx", "starts at 1"});
}

TEST_F(DamagedDataset, RejectsDecreasingDocumentIndex) {
  put<std::int64_t>(70 + 8 * 2, 1);
  expect_contains(open_error(), {prefix_ + ".idx", "decreases"});
}

TEST_F(DamagedDataset, RejectsDocumentIndexNotEndingAtSequenceCount) {
  put<std::int64_t>(70 + 8 * 3, 2);
  expect_contains(open_error(), {prefix_ + ".idx", "ends at 2", "3 sequences"});
}

TEST(UnalignedArray, ReadsValuesAtAnyAddressLikeASpan) {
  static_assert(std::random_access_iterator<UnalignedArray<std::int64_t>::iterator>);
  static_assert(std::ranges::random_access_range<UnalignedArray<std::int64_t>>);
  const std::vector<std::int64_t> values = {5, -1, 1LL << 40, 7};
  std::vector<std::uint8_t> bytes(3 + values.size() * sizeof(std::int64_t));
  std::memcpy(bytes.data() + 3, values.data(), values.size() * sizeof(std::int64_t));
  const auto view = UnalignedArray<std::int64_t>::from_bytes(bytes.data() + 3, values.size());
  EXPECT_EQ(view.size(), 4u);
  EXPECT_EQ(view[2], 1LL << 40);
  EXPECT_EQ(view.front(), 5);
  EXPECT_EQ(view.back(), 7);
  EXPECT_EQ(std::vector<std::int64_t>(view.begin(), view.end()), values);
  EXPECT_EQ(*std::max_element(view.begin(), view.end()), 1LL << 40);
  EXPECT_EQ(view.end() - view.begin(), 4);
  EXPECT_EQ(view.begin()[3], 7);
  const UnalignedArray<std::int64_t> middle = view.subspan(1, 2);
  EXPECT_EQ(std::vector<std::int64_t>(middle.begin(), middle.end()),
            (std::vector<std::int64_t>{-1, 1LL << 40}));
  const UnalignedArray<std::int64_t> owned = values;  // a view of a vector, too
  EXPECT_TRUE(std::equal(owned.begin(), owned.end(), view.begin(), view.end()));
}

TEST(IndexedDataset, ViewsTheIndexArraysAndCountsTokensFromThePointers) {
  const IndexedDataset golden(kGolden);
  const UnalignedArray<std::int32_t> lengths = golden.sequence_lengths();
  ASSERT_EQ(lengths.size(), golden.num_sequences());
  // The arrays are read in place: lengths start at byte 34 of the .idx, an unaligned address.
  const std::string idx = read_file_bytes(kGolden + ".idx");
  ASSERT_EQ(std::memcmp(lengths.bytes(), idx.data() + kIndexHeaderBytes, lengths.size_bytes()), 0);
  EXPECT_NE(reinterpret_cast<std::uintptr_t>(lengths.bytes()) % alignof(std::int32_t), 0u);
  EXPECT_EQ(golden.num_tokens(0, golden.num_sequences()), golden.num_tokens());
  for (const auto& [begin, end] : {std::pair<std::size_t, std::size_t>{0, 0}, {3, 3}, {0, 1},
                                   {17, 400}, {1000, golden.num_sequences()}}) {
    const std::uint64_t sum = std::accumulate(lengths.begin() + static_cast<std::ptrdiff_t>(begin),
                                              lengths.begin() + static_cast<std::ptrdiff_t>(end),
                                              std::uint64_t{0});
    EXPECT_EQ(golden.num_tokens(begin, end), sum) << begin << ".." << end;
  }
  expect_contains(error_of([&] { golden.num_tokens(5, golden.num_sequences() + 1); }),
                  {"out of range"});
  // Dropped pages read back from the page cache: the same values as the file holds (copies taken
  // before the drop, and the .idx bytes read from disk).
  const auto document_before = golden.read_document(0);
  const std::int32_t first_length = lengths[0];
  golden.release_mapped_pages();
  EXPECT_EQ(golden.sequence_lengths()[0], first_length);
  std::int32_t on_disk = 0;
  std::memcpy(&on_disk, idx.data() + kIndexHeaderBytes, sizeof(on_disk));
  EXPECT_EQ(golden.sequence_lengths()[0], on_disk);
  EXPECT_EQ(golden.read_document(0), document_before);
  ASSERT_FALSE(document_before.empty());
}

TEST(IndexedDataset, RejectsMissingIndex) {
  TempDir dir;
  expect_contains(error_of([&] { IndexedDataset dataset(dir / "absent"); }),
                  {dir / "absent.idx", "not found"});
}

TEST(IndexedDataset, RejectsMissingData) {
  TempDir dir;
  write_dataset(dir / "ds", DType::kUInt16, kSmallDocs);
  fs::remove(dir / "ds.bin");
  expect_contains(error_of([&] { IndexedDataset dataset(dir / "ds"); }),
                  {dir / "ds.bin", "not found"});
}

TEST(IndexedDataset, SuggestsThePrefixWhenGivenAFileName) {
  TempDir dir;
  write_dataset(dir / "ds", DType::kUInt16, kSmallDocs);
  expect_contains(error_of([&] { IndexedDataset dataset(dir / "ds.bin"); }),
                  {"not found", "without the extension", dir / "ds"});
}

TEST(IndexedDataset, RejectsOutOfRangeReads) {
  TempDir dir;
  write_dataset(dir / "ds", DType::kUInt16, kSmallDocs);
  const IndexedDataset dataset(dir / "ds");
  expect_contains(error_of([&] { dataset.read_document(3); }), {"document 3", "3 documents"});
  expect_contains(error_of([&] { dataset.read_sequence(3); }), {"sequence 3", "3 sequences"});
  expect_contains(error_of([&] { dataset.read_sequence(0, 3); }), {"offset 3"});
}

}  // namespace
}  // namespace megatron::data
