// AtomicFile (nothing under the final name until commit, temporaries removed), MappedFile and
// the up-front path checks.
#include <gtest/gtest.h>

#include <filesystem>

#include "megatron/core/check.h"
#include "megatron/core/file_io.h"
#include "test_support.h"

namespace megatron {
namespace {

namespace fs = std::filesystem;
using megatron::testing::error_of;
using megatron::testing::expect_contains;

class FileIo : public ::testing::Test {
 protected:
  megatron::testing::TempDir dir_;
};

TEST_F(FileIo, AtomicFileAppearsOnlyAfterCommit) {
  const std::string path = dir_ / "out.bin";
  std::string big(5 << 20, 'x');  // larger than the write buffer
  {
    AtomicFile file(path);
    file.write("abc", 3);
    file.write(big.data(), big.size());
    EXPECT_FALSE(fs::exists(path));
    EXPECT_TRUE(fs::exists(file.temp_path()));
    EXPECT_EQ(file.size(), 3 + big.size());
    file.commit();
    EXPECT_FALSE(fs::exists(file.temp_path()));
  }
  ASSERT_TRUE(fs::exists(path));
  EXPECT_EQ(fs::file_size(path), 3 + big.size());
  MappedFile mapped(path);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(mapped.data()), 3), "abc");
  EXPECT_EQ(mapped.data()[mapped.size() - 1], 'x');
  EXPECT_EQ(dir_.files().size(), 1u);
}

TEST_F(FileIo, AbandonedAtomicFileLeavesNothing) {
  const std::string path = dir_.write("out.bin", "previous good state");
  {
    AtomicFile file(path);
    file.write("partial", 7);
  }
  EXPECT_EQ(dir_.files().size(), 1u);  // the old file, untouched; no temporary left
  EXPECT_EQ(megatron::testing::read_file_bytes(path), "previous good state");
}

TEST_F(FileIo, AtomicFileInMissingFolderNamesIt) {
  expect_contains(error_of([&] { AtomicFile file(dir_ / "missing/out.bin"); }), {"missing/out.bin"});
}

TEST_F(FileIo, MappedFileOfMissingPathNamesIt) {
  expect_contains(error_of([&] { MappedFile mapped(dir_ / "nope.idx"); }), {"nope.idx"});
}

TEST_F(FileIo, ChecksReportWhatAndWhere) {
  EXPECT_THROW(check_readable_file(dir_ / "none.txt", "--vocab-file"), Error);
  EXPECT_THROW(check_readable_file(dir_.path().string(), "--vocab-file"), Error);  // a folder
  expect_contains(
      error_of([&] { check_writable_parent(dir_ / "no_such_folder/prefix", "--output-prefix"); }),
      {"does not exist", "--output-prefix"});
  EXPECT_NO_THROW(check_writable_parent(dir_ / "prefix", "--output-prefix"));
}

}  // namespace
}  // namespace megatron
