// Messages at Megatron's --logging-level: what passes at each level, the texts users grep for,
// MEGATRON_LOGGING_LEVEL as Python's int() reads it.
#include "megatron/core/log.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "test_support.h"

namespace megatron {
namespace {

// Restores the process's level after each test.
class LogTest : public ::testing::Test {
 protected:
  void TearDown() override {
    set_log_level(kLogInfo);
    ::unsetenv("MEGATRON_LOGGING_LEVEL");
  }
};

TEST_F(LogTest, MessagesHaveMegatronsFormsAtTheDefaultInfoLevel) {
  std::ostringstream out;
  const Log log(out);
  log.warning("Disabling sequence parallelism because tensor model parallelism is disabled");
  log.note("--lr given 2 times; the last value (2e-3) is used");
  log.record(kLogInfo, "megatron.core.datasets", "> total number of epochs: 1");
  log.record(kLogWarning, "megatron.core.datasets", "cache miss");
  log.record(kLogDebug, "megatron.core.datasets", "hidden at INFO");
  EXPECT_EQ(out.str(),
            "WARNING: Disabling sequence parallelism because tensor model parallelism is disabled\n"
            "note: --lr given 2 times; the last value (2e-3) is used\n"
            "INFO:megatron.core.datasets:> total number of epochs: 1\n"
            "WARNING:megatron.core.datasets:cache miss\n");
}

TEST_F(LogTest, ALevelPassesMessagesAtOrAboveItAsPythonsLoggingDoes) {
  const auto written = [](int level) {
    set_log_level(level);
    std::ostringstream out;
    const Log log(out);
    log.record(kLogDebug, "x", "d");
    log.note("n");
    log.warning("w");
    log.record(kLogError, "x", "e");
    return out.str();
  };
  EXPECT_EQ(written(10), "DEBUG:x:d\nnote: n\nWARNING: w\nERROR:x:e\n");
  EXPECT_EQ(written(20), "note: n\nWARNING: w\nERROR:x:e\n");
  EXPECT_EQ(written(25), "WARNING: w\nERROR:x:e\n");  // between INFO and WARNING
  EXPECT_EQ(written(30), "WARNING: w\nERROR:x:e\n");
  EXPECT_EQ(written(40), "ERROR:x:e\n");
  EXPECT_EQ(written(51), "");
}

TEST_F(LogTest, PreparedLinesAreMessagesByTheirPrefixAndOtherLinesAlwaysPass) {
  set_log_level(kLogError);
  std::ostringstream out;
  const Log log(out);
  log.line("WARNING: dropped at ERROR");
  log.line("note: dropped too");
  log.line("using world size: 1, data-parallel size: 1");  // one of Megatron's start-up lines
  EXPECT_EQ(out.str(), "using world size: 1, data-parallel size: 1\n");
}

TEST_F(LogTest, AToolsLogPutsItsNameInFront) {
  std::ostringstream out;
  const Log log(out, "preprocess_data");
  log.note("the lock was taken over");
  log.line("note: --workers given 2 times; the last value (4) is used");
  log.warning("w");
  EXPECT_EQ(out.str(), "preprocess_data: note: the lock was taken over\n"
                       "preprocess_data: note: --workers given 2 times; the last value (4) is used\n"
                       "preprocess_data: WARNING: w\n");
}

TEST_F(LogTest, EnvironmentLevelIsReadAsPythonsInt) {
  EXPECT_EQ(log_level_from_environment(), std::nullopt);
  ::setenv("MEGATRON_LOGGING_LEVEL", " 40 ", 1);
  EXPECT_EQ(log_level_from_environment(), 40);
  ::setenv("MEGATRON_LOGGING_LEVEL", "+5", 1);
  EXPECT_EQ(log_level_from_environment(), 5);
  ::setenv("MEGATRON_LOGGING_LEVEL", "1_0", 1);  // int("1_0") is 10
  EXPECT_EQ(log_level_from_environment(), 10);
  for (const char* bad : {"", "WARNING", "4.0", "1e3", "99999999999", "1__0"}) {
    ::setenv("MEGATRON_LOGGING_LEVEL", bad, 1);
    EXPECT_THROW(log_level_from_environment(), Error) << bad;
  }
}

}  // namespace
}  // namespace megatron
