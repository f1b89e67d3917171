// --exit-signal-handler's pieces: signal names as users write them, and a caught signal recorded
// rather than fatal, with the previous disposition back afterwards.
#include <gtest/gtest.h>

#include <csignal>

#include "megatron/core/check.h"
#include "megatron/core/exit_signal.h"

namespace megatron {
namespace {

TEST(ExitSignal, ParsesNamesWithOrWithoutSigAndNumbers) {
  EXPECT_EQ(parse_signal_name("SIGTERM", "--exit-signal"), SIGTERM);
  EXPECT_EQ(parse_signal_name("term", "--exit-signal"), SIGTERM);
  EXPECT_EQ(parse_signal_name("SIGUSR1", "--exit-signal"), SIGUSR1);
  EXPECT_EQ(parse_signal_name("Usr2", "--exit-signal"), SIGUSR2);
  EXPECT_EQ(parse_signal_name("15", "--exit-signal"), SIGTERM);
  EXPECT_EQ(signal_name(SIGUSR1), "SIGUSR1");
}

TEST(ExitSignal, RefusesUncatchableAndUnknownSignalsNamingTheFlag) {
  for (const char* bad : {"SIGKILL", "9", "SIGSTOP", "SIGBOGUS", "", "15x"}) {
    try {
      parse_signal_name(bad, "--exit-signal");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--exit-signal: '"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("SIGTERM"), std::string::npos) << e.what();
    }
  }
}

TEST(ExitSignal, RecordsTheSignalInsteadOfDyingAndRestoresTheOldHandler) {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction before {};
  ASSERT_EQ(sigaction(SIGUSR2, &ignore, &before), 0);
  {
    ExitSignal handler(SIGUSR2);
    EXPECT_FALSE(handler.received());
    ASSERT_EQ(std::raise(SIGUSR2), 0);  // would end the test binary without the handler
    EXPECT_TRUE(handler.received());
    EXPECT_THROW(ExitSignal(SIGUSR1), Error) << "a second live handler";
  }
  struct sigaction after {};
  ASSERT_EQ(sigaction(SIGUSR2, nullptr, &after), 0);
  EXPECT_EQ(after.sa_handler, SIG_IGN);
  {
    ExitSignal again(SIGUSR2);
    EXPECT_FALSE(again.received()) << "a new handler starts clear";
  }
  sigaction(SIGUSR2, &before, nullptr);
}

}  // namespace
}  // namespace megatron
