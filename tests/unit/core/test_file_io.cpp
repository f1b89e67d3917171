// AtomicFile (nothing under the final name until commit, temporaries removed), TemporaryFolder,
// the signal handler (in a forked child: it re-raises the signal), MappedFile and path checks.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

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

// Streaming mode: O_DIRECT from aligned buffers, the tail padded and cut back. Pieces of odd sizes
// crossing the 16 MiB buffer boundary twice must come back byte for byte, with nothing padded.
TEST_F(FileIo, StreamingAtomicFileWritesExactlyTheBytes) {
  const std::string path = dir_ / "stream.bin";
  std::string expected;
  std::uint32_t x = 12345;
  for (const std::size_t piece : {std::size_t{1}, std::size_t{4095}, std::size_t{(16 << 20) + 3}, std::size_t{0},
                                  std::size_t{7}, std::size_t{(16 << 20) - 9}, std::size_t{4097}}) {
    std::string bytes(piece, '\0');
    for (char& c : bytes) c = static_cast<char>((x = x * 1103515245u + 12345u) >> 24);
    expected += bytes;
  }
  {
    AtomicFile file(path, AtomicFile::Mode::kStreaming);
    std::size_t at = 0;
    for (const std::size_t piece : {std::size_t{1}, std::size_t{4095}, std::size_t{(16 << 20) + 3}, std::size_t{0},
                                    std::size_t{7}, std::size_t{(16 << 20) - 9}, std::size_t{4097}}) {
      file.write(expected.data() + at, piece);
      at += piece;
    }
    EXPECT_FALSE(fs::exists(path));
    EXPECT_EQ(file.size(), expected.size());
    file.commit();
  }
  EXPECT_EQ(fs::file_size(path), expected.size());
  EXPECT_TRUE(megatron::testing::read_file_bytes(path) == expected);
  // An empty streamed file is empty.
  const std::string empty = dir_ / "empty.bin";
  AtomicFile(empty, AtomicFile::Mode::kStreaming).commit();
  EXPECT_EQ(fs::file_size(empty), 0u);
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

TEST_F(FileIo, TemporaryFolderIsRemovedUnlessReleased) {
  const std::string path = dir_ / "iter_0000001.tmp.1";
  {
    TemporaryFolder folder(path);
    fs::create_directories(fs::path(path) / "mp_rank_00");
    std::ofstream(fs::path(path) / "mp_rank_00" / "model.safetensors") << "x";
  }
  EXPECT_FALSE(fs::exists(path));
  {
    TemporaryFolder folder(path);
    fs::rename(path, dir_ / "iter_0000001");
    folder.release();
  }
  EXPECT_TRUE(fs::is_directory(dir_ / "iter_0000001"));
  expect_contains(error_of([&] { TemporaryFolder folder(dir_ / "missing/iter.tmp.1"); }), {"missing/iter.tmp.1"});
}

// Runs `child` in a forked process and returns its wait status.
template <typename Fn>
int status_of_child(Fn&& child) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    child();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST_F(FileIo, SignalRemovesTemporaryFoldersAndFilesThenKills) {
  const std::string folder = dir_ / "iter_0000002.tmp.7";
  const std::string final_file = dir_ / "out.bin";
  const int status = status_of_child([&] {
    install_temp_file_cleanup();
    TemporaryFolder temp(folder);
    fs::create_directories(fs::path(folder) / "mp_rank_00" / "deeper");
    for (int i = 0; i < 300; ++i) {  // more entries than one getdents64 buffer holds
      std::ofstream(fs::path(folder) / "mp_rank_00" / ("file_with_a_long_name_" + std::to_string(i))) << i;
    }
    std::ofstream(fs::path(folder) / "mp_rank_00" / "deeper" / "meta.json") << "{}";
    AtomicFile inside((fs::path(folder) / "mp_rank_00" / "model.safetensors").string());
    AtomicFile beside(final_file);
    beside.write("partial", 7);
    std::raise(SIGTERM);
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_FALSE(fs::exists(folder));
  EXPECT_TRUE(dir_.files().empty());  // neither the folder nor the file's temporary
}

TEST_F(FileIo, SignalIgnoredAtStartStaysIgnored) {
  for (int signo : {SIGHUP, SIGINT}) {
    const int status = status_of_child([&] {
      std::signal(signo, SIG_IGN);  // as nohup, or a script starting a background job
      install_temp_file_cleanup();
      std::raise(signo);
    });
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "signal " << signo << ", status " << status;
  }
  const int status = status_of_child([] {
    std::signal(SIGHUP, SIG_DFL);
    install_temp_file_cleanup();
    std::raise(SIGHUP);
  });
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGHUP) << "status " << status;
}

}  // namespace
}  // namespace megatron
