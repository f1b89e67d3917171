// merge_datasets(): the golden dataset split in three and merged back is byte-identical, inputs
// are taken in sorted name order, and incomplete pairs, dtype mismatches and bad folders fail.
#include <gtest/gtest.h>

#include <filesystem>
#include <initializer_list>

#include "megatron/core/check.h"
#include "megatron/data/indexed_dataset.h"
#include "test_support.h"

namespace megatron::data {
namespace {

namespace fs = std::filesystem;
using megatron::testing::error_of;
using megatron::testing::expect_contains;
using megatron::testing::read_file_bytes;

const std::string kGolden = megatron::testing::golden_dataset_prefix();

// A temporary folder holding an empty "in" folder for the datasets to merge.
class MergeDir : public megatron::testing::TempDir {
 public:
  MergeDir() { fs::create_directory(path() / "in"); }
};

// A dataset of single-token, single-sequence documents.
void write_tokens(const std::string& prefix, DType dtype, std::initializer_list<int> ids) {
  IndexedDatasetWriter writer(prefix, dtype);
  for (const int id : ids) {
    const std::int32_t token = id;
    const std::int32_t length = 1;
    writer.add_document({&token, 1}, {&length, 1});
  }
  writer.finalize();
}

// Documents [first, last) of `source`, written with add_document.
void write_slice(const IndexedDataset& source, std::size_t first, std::size_t last,
                 const std::string& prefix) {
  IndexedDatasetWriter writer(prefix, source.dtype());
  const auto docs = source.document_indices();
  for (std::size_t d = first; d < last; ++d) {
    const std::vector<std::int64_t> ids = source.read_document(d);
    const std::vector<std::int32_t> tokens(ids.begin(), ids.end());
    writer.add_document(tokens, source.sequence_lengths().subspan(docs[d], docs[d + 1] - docs[d]));
  }
  writer.finalize();
}

TEST(MergeDatasets, MergesGoldenSplitInThreeBackToIdenticalBytes) {
  MergeDir dir;
  const IndexedDataset golden(kGolden);
  const std::size_t n = golden.num_documents();
  ASSERT_EQ(golden.document_indices()[3], golden.document_indices()[4]);  // document 3 is empty
  write_slice(golden, 0, 3, dir / "in/part_0");
  write_slice(golden, 3, 4, dir / "in/part_1");  // a dataset without tokens
  write_slice(golden, 4, n, dir / "in/part_2");

  const std::vector<std::string> merged = merge_datasets(dir / "in", dir / "merged");
  EXPECT_EQ(merged, (std::vector<std::string>{dir / "in/part_0", dir / "in/part_1",
                                              dir / "in/part_2"}));
  EXPECT_EQ(read_file_bytes(dir / "merged.idx"), read_file_bytes(kGolden + ".idx"));
  EXPECT_EQ(read_file_bytes(dir / "merged.bin"), read_file_bytes(kGolden + ".bin"));
}

TEST(MergeDatasets, AppendsInLexicographicOrderOfNames) {
  MergeDir dir;
  write_tokens(dir / "in/b", DType::kUInt16, {3});
  write_tokens(dir / "in/a2", DType::kUInt16, {2});
  write_tokens(dir / "in/a10", DType::kUInt16, {1, 11});
  write_tokens(dir / "in/B", DType::kUInt16, {0});

  const std::vector<std::string> merged = merge_datasets(dir / "in", dir / "out");
  EXPECT_EQ(merged, (std::vector<std::string>{dir / "in/B", dir / "in/a10", dir / "in/a2",
                                              dir / "in/b"}));
  const IndexedDataset out(dir / "out");
  ASSERT_EQ(out.num_documents(), 5u);
  const std::vector<std::int64_t> expected = {0, 1, 11, 2, 3};
  for (std::size_t d = 0; d < 5; ++d) {
    EXPECT_EQ(out.read_document(d), std::vector<std::int64_t>{expected[d]}) << "document " << d;
  }
  EXPECT_EQ(out.document_indices().back(), 5);
}

TEST(MergeDatasets, SkipsFilesThatAreNotBinOrIdx) {
  MergeDir dir;
  write_tokens(dir / "in/a", DType::kInt32, {70000});
  dir.write("in/README.txt", "notes\n");
  fs::create_directory(dir / "in/sub.idx");
  EXPECT_EQ(merge_datasets(dir / "in", dir / "out"), std::vector<std::string>{dir / "in/a"});
  EXPECT_EQ(IndexedDataset(dir / "out").read_document(0), std::vector<std::int64_t>{70000});
}

TEST(MergeDatasets, RejectsMissingBinPartner) {
  MergeDir dir;
  write_tokens(dir / "in/a", DType::kUInt16, {1});
  write_tokens(dir / "in/b", DType::kUInt16, {2});
  fs::remove(dir / "in/b.bin");
  expect_contains(error_of([&] { merge_datasets(dir / "in", dir / "out"); }),
                  {dir / "in/b.idx", "no matching", "b.bin"});
  EXPECT_FALSE(fs::exists(dir / "out.idx"));
}

TEST(MergeDatasets, RejectsMissingIdxPartner) {
  MergeDir dir;
  write_tokens(dir / "in/a", DType::kUInt16, {1});
  fs::remove(dir / "in/a.idx");
  expect_contains(error_of([&] { merge_datasets(dir / "in", dir / "out"); }),
                  {dir / "in/a.bin", "no matching", "a.idx"});
}

TEST(MergeDatasets, RejectsDtypeMismatchNamingBothFiles) {
  MergeDir dir;
  write_tokens(dir / "in/a", DType::kUInt16, {1});
  write_tokens(dir / "in/b", DType::kInt32, {2});
  expect_contains(error_of([&] { merge_datasets(dir / "in", dir / "out"); }),
                  {"dtype mismatch", dir / "in/b.idx", "int32", dir / "in/a.idx", "uint16"});
  EXPECT_FALSE(fs::exists(dir / "out.idx"));
  EXPECT_FALSE(fs::exists(dir / "out.bin"));
}

TEST(MergeDatasets, RejectsMissingInputFolder) {
  MergeDir dir;
  expect_contains(error_of([&] { merge_datasets(dir / "absent", dir / "out"); }),
                  {dir / "absent", "does not exist"});
}

TEST(MergeDatasets, RejectsFolderWithoutDatasets) {
  MergeDir dir;
  expect_contains(error_of([&] { merge_datasets(dir / "in", dir / "out"); }),
                  {"no .bin/.idx dataset pairs", dir / "in"});
}

TEST(MergeDatasets, RejectsMissingOutputFolder) {
  MergeDir dir;
  write_tokens(dir / "in/a", DType::kUInt16, {1});
  expect_contains(error_of([&] { merge_datasets(dir / "in", dir / "absent/out"); }),
                  {"absent", "does not exist"});
}

TEST(MergeDatasets, RejectsOutputThatIsAlsoAnInput) {
  MergeDir dir;
  write_tokens(dir / "in/a", DType::kUInt16, {1});
  write_tokens(dir / "in/merged", DType::kUInt16, {2});
  expect_contains(error_of([&] { merge_datasets(dir / "in", dir / "in/merged"); }),
                  {"also an input", "merged.idx"});
}

}  // namespace
}  // namespace megatron::data
