// OutputLock (a second holder is refused by name; the file goes with the lock) and the start-up
// removal of temporaries whose process is gone (dead pid, our own reused pid) but not live ones.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "megatron/core/check.h"
#include "megatron/core/process_lock.h"
#include "test_support.h"

namespace megatron {
namespace {

namespace fs = std::filesystem;
using megatron::testing::error_of;
using megatron::testing::expect_contains;

class ProcessLock : public ::testing::Test {
 protected:
  megatron::testing::TempDir dir_;
};

// The pid of a process that has exited and been reaped.
long dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

TEST_F(ProcessLock, SecondHolderIsRefusedNamingTheFirst) {
  const std::string path = dir_ / "p_text_document.lock";
  {
    const OutputLock first(path, "--output-prefix p_text_document");
    EXPECT_TRUE(first.note().empty()) << first.note();
    // flock belongs to an open file: a second open in the same process conflicts like another process.
    const std::string message = error_of([&] { OutputLock second(path, "--output-prefix p_text_document"); });
    expect_contains(message, {"--output-prefix p_text_document", "process " + std::to_string(::getpid()),
                              "test_core", path});
  }
  EXPECT_FALSE(fs::exists(path));  // removed with the lock
  EXPECT_NO_THROW(OutputLock again(path, "--save x"));
}

TEST_F(ProcessLock, LockFileOfADeadHolderIsTakenOver) {
  const std::string path = dir_.write("ckpt.lock", std::to_string(dead_pid()) + "\nmegatron_train\n");
  const OutputLock lock(path, "--save ckpt");
  EXPECT_EQ(megatron::testing::read_file_bytes(path).rfind(std::to_string(::getpid()) + "\n", 0), 0u);
}

TEST_F(ProcessLock, ParsesTemporaryNames) {
  const auto a = parse_temporary_name("p_text_document.bin.tmp.1234.0");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->base, "p_text_document.bin");
  EXPECT_EQ(a->pid, 1234);
  const auto b = parse_temporary_name("iter_0000020.tmp.99");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->base, "iter_0000020");
  EXPECT_EQ(b->pid, 99);
  for (const char* name : {"p.bin", "p.tmp.", "p.tmp.12x", "p.tmp.1.2.3", ".tmp.5", "p.tmp.5.x"}) {
    EXPECT_FALSE(parse_temporary_name(name).has_value()) << name;
  }
}

TEST_F(ProcessLock, RemovesOnlyTemporariesOfGoneProcessesForTheseOutputs) {
  const std::string dead = std::to_string(dead_pid());
  const std::string own = std::to_string(::getpid());
  const std::string live = std::to_string(::getppid());
  dir_.write("p.bin.tmp." + dead + ".0", "x");
  dir_.write("p.idx.tmp." + own + ".1", "x");  // a reused pid: this process made none yet
  dir_.write("p.bin.tmp." + live + ".2", "x");  // a live writer
  dir_.write("q.bin.tmp." + dead + ".0", "x");  // another output
  dir_.write("p.bin", "final");
  const auto removed = remove_stale_temporaries_of({dir_ / "p.bin", dir_ / "p.idx"});
  EXPECT_EQ(removed.size(), 2u);
  EXPECT_EQ(dir_.files(), (std::vector<std::string>{"p.bin", "p.bin.tmp." + live + ".2", "q.bin.tmp." + dead + ".0"}));
  expect_contains(describe_removed_temporaries(removed),
                  {"removed 2 temporaries left by runs that did not finish", "p.bin.tmp." + dead + ".0"});
  EXPECT_EQ(describe_removed_temporaries({}), "");
}

TEST_F(ProcessLock, RemovesATemporaryFolderWithItsContents) {
  const std::string folder = dir_ / ("iter_0000003.tmp." + std::to_string(dead_pid()));
  fs::create_directories(fs::path(folder) / "mp_rank_00");
  std::ofstream(fs::path(folder) / "mp_rank_00" / "model.safetensors") << "x";
  const auto removed = remove_stale_temporaries(dir_.path().string(), [](std::string_view base) {
    return base.starts_with("iter_");
  });
  EXPECT_EQ(removed, std::vector<std::string>{folder});
  EXPECT_TRUE(dir_.files().empty());
  EXPECT_TRUE(remove_stale_temporaries(dir_ / "missing", [](std::string_view) { return true; }).empty());
}

TEST_F(ProcessLock, LiveProcessesAreNotGone) {
  EXPECT_FALSE(temporary_owner_is_gone(::getppid()));
  EXPECT_TRUE(temporary_owner_is_gone(::getpid()));
  EXPECT_TRUE(temporary_owner_is_gone(dead_pid()));
  EXPECT_FALSE(temporary_owner_is_gone(0));
}

}  // namespace
}  // namespace megatron
