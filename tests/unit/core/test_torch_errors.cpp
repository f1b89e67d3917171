// LibTorch's errors as the tools print them: one line with the message and its context, no C++
// stack trace (c10::Error::what() has one: "Exception raised from ... frame #0"), unless
// MEGATRON_BACKTRACE asks for it; run_torch_tool prints that line and gives exit status 1.
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "megatron/core/check.h"
#include "megatron/core/torch_errors.h"
#include "test_support.h"

namespace megatron {
namespace {

// A c10::Error as LibTorch throws it, its message on two lines (as LibTorch's context lines are).
void fail_in_libtorch() {
  TORCH_CHECK(false, "index 7 is out of bounds for dimension 0 with size 3\n  while loading decoder.layers.0");
}

TEST(TorchErrors, ALibTorchErrorIsOneLineWithItsContextAndNoStackTrace) {
  ::unsetenv("MEGATRON_BACKTRACE");
  const std::string message = testing::error_of([] { with_one_line_torch_errors(fail_in_libtorch); });
  EXPECT_EQ(message,
            "LibTorch: index 7 is out of bounds for dimension 0 with size 3; while loading decoder.layers.0");
}

TEST(TorchErrors, MegatronBacktraceKeepsTheLibTorchErrorAsItIs) {
  ::setenv("MEGATRON_BACKTRACE", "1", 1);
  bool passed_through = false;
  try {
    with_one_line_torch_errors(fail_in_libtorch);
  } catch (const c10::Error& e) {
    passed_through = std::string(e.what()).find("index 7 is out of bounds") != std::string::npos;
  }
  ::unsetenv("MEGATRON_BACKTRACE");
  EXPECT_TRUE(passed_through);
}

TEST(TorchErrors, RunTorchToolPrintsOneLineAndFails) {
  ::unsetenv("MEGATRON_BACKTRACE");
  ::testing::internal::CaptureStderr();
  const int status = run_torch_tool("generate", [] {
    fail_in_libtorch();
    return 0;
  });
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(status, 1);
  EXPECT_EQ(err,
            "generate: error: LibTorch: index 7 is out of bounds for dimension 0 with size 3; while loading "
            "decoder.layers.0\n");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(run_torch_tool("generate", [] { return 3; }), 3);  // a status of its own goes through
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace megatron
