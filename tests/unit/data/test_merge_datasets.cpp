// merge_datasets(): the golden dataset split in three and merged back is byte-identical, inputs
// are taken in sorted name order, and incomplete pairs, dtype mismatches and bad folders fail.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>

#include "megatron/core/check.h"
#include "megatron/data/indexed_dataset.h"

namespace megatron::data {
namespace {

namespace fs = std::filesystem;

const std::string kGolden = std::string(MEGATRON_SHARED_DATA_DIR) +
                            "/megatron_golden/corpus_text_document";

class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            str_cat("megatron_merge_", info->name(), "_", ::getpid(), "_", counter++);
    fs::remove_all(path_);
    fs::create_directories(path_ / "in");
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a megatron::Error";
  return "";
}

void expect_contains(const std::string& text, std::initializer_list<std::string> parts) {
  for (const std::string& part : parts) {
    EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
  }
}

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
  TempDir dir;
  const IndexedDataset golden(kGolden);
  const std::size_t n = golden.num_documents();
  ASSERT_EQ(golden.document_indices()[3], golden.document_indices()[4]);  // document 3 is empty
  write_slice(golden, 0, 3, dir / "in/part_0");
  write_slice(golden, 3, 4, dir / "in/part_1");  // a dataset without tokens
  write_slice(golden, 4, n, dir / "in/part_2");

  const std::vector<std::string> merged = merge_datasets(dir / "in", dir / "merged");
  EXPECT_EQ(merged, (std::vector<std::string>{dir / "in/part_0", dir / "in/part_1",
                                              dir / "in/part_2"}));
  EXPECT_EQ(read_bytes(dir / "merged.idx"), read_bytes(kGolden + ".idx"));
  EXPECT_EQ(read_bytes(dir / "merged.bin"), read_bytes(kGolden + ".bin"));
}

TEST(MergeDatasets, AppendsInLexicographicOrderOfNames) {
  TempDir dir;
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
  TempDir dir;
  write_tokens(dir / "in/a", DType::kInt32, {70000});
  std::ofstream(dir / "in/README.txt") << "notes\n";
  fs::create_directory(dir / "in/sub.idx");
  EXPECT_EQ(merge_datasets(dir / "in", dir / "out"), std::vector<std::string>{dir / "in/a"});
  EXPECT_EQ(IndexedDataset(dir / "out").read_document(0), std::vector<std::int64_t>{70000});
}

TEST(MergeDatasets, RejectsMissingBinPartner) {
  TempDir dir;
  write_tokens(dir / "in/a", DType::kUInt16, {1});
  write_tokens(dir / "in/b", DType::kUInt16, {2});
  fs::remove(dir / "in/b.bin");
  expect_contains(error_of([&] { merge_datasets(dir / "in", dir / "out"); }),
                  {dir / "in/b.idx", "no matching", "b.bin"});
  EXPECT_FALSE(fs::exists(dir / "out.idx"));
}

TEST(MergeDatasets, RejectsMissingIdxPartner) {
  TempDir dir;
  write_tokens(dir / "in/a", DType::kUInt16, {1});
  fs::remove(dir / "in/a.idx");
  expect_contains(error_of([&] { merge_datasets(dir / "in", dir / "out"); }),
                  {dir / "in/a.bin", "no matching", "a.idx"});
}

TEST(MergeDatasets, RejectsDtypeMismatchNamingBothFiles) {
  TempDir dir;
  write_tokens(dir / "in/a", DType::kUInt16, {1});
  write_tokens(dir / "in/b", DType::kInt32, {2});
  expect_contains(error_of([&] { merge_datasets(dir / "in", dir / "out"); }),
                  {"dtype mismatch", dir / "in/b.idx", "int32", dir / "in/a.idx", "uint16"});
  EXPECT_FALSE(fs::exists(dir / "out.idx"));
  EXPECT_FALSE(fs::exists(dir / "out.bin"));
}

TEST(MergeDatasets, RejectsMissingInputFolder) {
  TempDir dir;
  expect_contains(error_of([&] { merge_datasets(dir / "absent", dir / "out"); }),
                  {dir / "absent", "does not exist"});
}

TEST(MergeDatasets, RejectsFolderWithoutDatasets) {
  TempDir dir;
  expect_contains(error_of([&] { merge_datasets(dir / "in", dir / "out"); }),
                  {"no .bin/.idx dataset pairs", dir / "in"});
}

TEST(MergeDatasets, RejectsMissingOutputFolder) {
  TempDir dir;
  write_tokens(dir / "in/a", DType::kUInt16, {1});
  expect_contains(error_of([&] { merge_datasets(dir / "in", dir / "absent/out"); }),
                  {"absent", "does not exist"});
}

TEST(MergeDatasets, RejectsOutputThatIsAlsoAnInput) {
  TempDir dir;
  write_tokens(dir / "in/a", DType::kUInt16, {1});
  write_tokens(dir / "in/merged", DType::kUInt16, {2});
  expect_contains(error_of([&] { merge_datasets(dir / "in", dir / "in/merged"); }),
                  {"also an input", "merged.idx"});
}

}  // namespace
}  // namespace megatron::data
