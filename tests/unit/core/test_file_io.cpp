// AtomicFile (nothing under the final name until commit, temporaries removed), MappedFile and
// the up-front path checks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "megatron/core/check.h"
#include "megatron/core/file_io.h"

namespace megatron {
namespace {

namespace fs = std::filesystem;

class FileIo : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("megatron_file_io_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::size_t files_in_dir() const {
    return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()));
  }
  fs::path dir_;
};

TEST_F(FileIo, AtomicFileAppearsOnlyAfterCommit) {
  const std::string path = (dir_ / "out.bin").string();
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
  EXPECT_EQ(files_in_dir(), 1u);
}

TEST_F(FileIo, AbandonedAtomicFileLeavesNothing) {
  const std::string path = (dir_ / "out.bin").string();
  std::ofstream(path) << "previous good state";
  {
    AtomicFile file(path);
    file.write("partial", 7);
  }
  EXPECT_EQ(files_in_dir(), 1u);  // the old file, untouched; no temporary left
  std::ifstream in(path);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "previous good state");
}

TEST_F(FileIo, AtomicFileInMissingFolderNamesIt) {
  try {
    AtomicFile file((dir_ / "missing" / "out.bin").string());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing/out.bin"), std::string::npos) << e.what();
  }
}

TEST_F(FileIo, MappedFileOfMissingPathNamesIt) {
  try {
    MappedFile mapped((dir_ / "nope.idx").string());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope.idx"), std::string::npos) << e.what();
  }
}

TEST_F(FileIo, ChecksReportWhatAndWhere) {
  EXPECT_THROW(check_readable_file((dir_ / "none.txt").string(), "--vocab-file"), Error);
  EXPECT_THROW(check_readable_file(dir_.string(), "--vocab-file"), Error);  // a folder
  try {
    check_writable_parent((dir_ / "no_such_folder" / "prefix").string(), "--output-prefix");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--output-prefix"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(check_writable_parent((dir_ / "prefix").string(), "--output-prefix"));
}

}  // namespace
}  // namespace megatron
