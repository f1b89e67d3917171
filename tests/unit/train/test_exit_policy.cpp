// The early-exit decisions of Megatron's checkpoint_and_decide_exit: the exit interval at its
// multiples, the duration once the start is older than the limit (the minutes as Python's str()
// prints them), the exit signal; the rank-dependent conditions go through the all-ranks reduction
// on every call, and the signal handler lives exactly as long as the policy.
#include "megatron/train/exit_policy.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <charconv>
#include <csignal>
#include <regex>
#include <vector>

namespace megatron::train {
namespace {

using Clock = ExitPolicy::Clock;
using std::chrono::seconds;

// This rank alone decides (a world of one).
bool mine(bool own) { return own; }

// The shortest decimal that reads back as `value`, fixed notation (Python's repr between 1e-4 and 1e16).
std::string shortest_fixed(double value) {
  char buf[64];
  const auto end = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::fixed).ptr;
  std::string s(buf, end);
  if (s.find('.') == std::string::npos) s += ".0";
  return s;
}

TEST(ExitPolicy, IntervalStopsAtItsMultiplesOnlyWithMegatronsText) {
  const ExitPolicy policy(ExitPlan{std::nullopt, 5, std::nullopt}, Clock::now());
  std::vector<std::int64_t> stops;
  for (std::int64_t it = 1; it <= 12; ++it) {
    if (const auto stop = policy.limits(it, mine)) {
      stops.push_back(it);
      EXPECT_EQ(stop->reason, "exit-interval");
      EXPECT_EQ(stop->what, "exiting program at iteration " + std::to_string(it));
    }
  }
  EXPECT_EQ(stops, (std::vector<std::int64_t>{5, 10}));
  EXPECT_FALSE(policy.signal(mine).has_value());  // no --exit-signal-handler
}

TEST(ExitPolicy, DurationStopsOnceTheStartIsOlderThanTheLimit) {
  const ExitPlan plan{std::nullopt, std::nullopt, 2};  // --exit-duration-in-mins 2
  EXPECT_FALSE(ExitPolicy(plan, Clock::now()).limits(1, mine).has_value());
  EXPECT_FALSE(ExitPolicy(plan, Clock::now() - seconds(100)).limits(7, mine).has_value());

  const auto stop = ExitPolicy(plan, Clock::now() - seconds(180)).limits(7, mine);
  ASSERT_TRUE(stop.has_value());
  EXPECT_EQ(stop->reason, "exit-duration");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(stop->what, m, std::regex(R"(exiting program after ([0-9]+\.[0-9]+) minutes)")))
      << stop->what;
  const double minutes = std::stod(m[1].str());
  EXPECT_GE(minutes, 3.0);
  EXPECT_LT(minutes, 3.5);  // 180 s and the time this test took
  // Python's str(): the shortest digits that read back as the same float.
  EXPECT_EQ(m[1].str(), shortest_fixed(minutes));
  EXPECT_GT(m[1].str().size(), 4u) << "seconds past the three minutes show in the digits";
}

TEST(ExitPolicy, DurationIsCheckedBeforeTheInterval) {
  const ExitPolicy policy(ExitPlan{std::nullopt, 5, 1}, Clock::now() - seconds(120));
  const auto stop = policy.limits(10, mine);  // both due
  ASSERT_TRUE(stop.has_value());
  EXPECT_EQ(stop->reason, "exit-duration");
}

TEST(ExitPolicy, AnotherRanksTrippedConditionStopsThisRankToo) {
  // The reduction answers true: some other rank got the signal or ran out of time.
  std::vector<bool> asked;
  const auto another_rank_tripped = [&](bool own) {
    asked.push_back(own);
    return true;
  };
  const ExitPolicy policy(ExitPlan{SIGUSR2, std::nullopt, 60}, Clock::now());

  const auto by_signal = policy.signal(another_rank_tripped);
  ASSERT_TRUE(by_signal.has_value());
  EXPECT_EQ(by_signal->reason, "signal");
  EXPECT_EQ(by_signal->what, "exiting program after receiving SIGUSR2.");

  const auto by_time = policy.limits(3, another_rank_tripped);
  ASSERT_TRUE(by_time.has_value());
  EXPECT_EQ(by_time->reason, "exit-duration");
  EXPECT_EQ(by_time->what.rfind("exiting program after ", 0), 0u) << by_time->what;
  // This rank had neither: it said so, and stopped on the others' word.
  EXPECT_EQ(asked, (std::vector<bool>{false, false}));
}

TEST(ExitPolicy, EveryRankTakesPartInEachReductionEvenWhenItsOwnAnswerIsNo) {
  // The all-reduce is collective: a rank that skipped it would hang the others.
  int calls = 0;
  const auto count = [&](bool own) {
    ++calls;
    return own;
  };
  const ExitPolicy policy(ExitPlan{SIGUSR2, 1000, 60}, Clock::now());
  for (std::int64_t it = 1; it <= 4; ++it) {
    EXPECT_FALSE(policy.signal(count).has_value());
    EXPECT_FALSE(policy.limits(it, count).has_value());
  }
  EXPECT_EQ(calls, 8);  // one for the signal and one for the duration per iteration
}

TEST(ExitPolicy, WithoutAPlanNeverStops) {
  const ExitPolicy policy(ExitPlan{}, Clock::now() - std::chrono::hours(1000));
  const auto always = [](bool) { return true; };
  for (const std::int64_t it : {1, 5, 10, 100, 1000, 1'000'000}) {
    EXPECT_FALSE(policy.limits(it, mine).has_value()) << it;
    EXPECT_FALSE(policy.limits(it, always).has_value()) << it;  // nothing to reduce
  }
  EXPECT_FALSE(policy.signal(always).has_value());
}

TEST(ExitPolicy, TheSignalStopsTheRunAfterItArrives) {
  for (const int signo : {SIGUSR1, SIGUSR2}) {
    const std::string name = signo == SIGUSR1 ? "SIGUSR1" : "SIGUSR2";
    const ExitPolicy policy(ExitPlan{signo, std::nullopt, std::nullopt}, Clock::now());
    EXPECT_FALSE(policy.signal(mine).has_value()) << name;
    ASSERT_EQ(std::raise(signo), 0);  // would end the test binary without the handler
    const auto stop = policy.signal(mine);
    ASSERT_TRUE(stop.has_value()) << name;
    EXPECT_EQ(stop->reason, "signal");
    EXPECT_EQ(stop->what, "exiting program after receiving " + name + ".");
    EXPECT_FALSE(policy.limits(1, mine).has_value()) << "the signal is not a limit";
  }
}

TEST(ExitPolicy, RestoresTheEarlierHandlerWhenDestroyed) {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction before {};
  ASSERT_EQ(sigaction(SIGUSR1, &ignore, &before), 0);
  {
    const ExitPolicy policy(ExitPlan{SIGUSR1, std::nullopt, std::nullopt}, Clock::now());
    struct sigaction during {};
    ASSERT_EQ(sigaction(SIGUSR1, nullptr, &during), 0);
    EXPECT_NE(during.sa_handler, SIG_IGN);
    EXPECT_NE(during.sa_handler, SIG_DFL);
  }
  struct sigaction after {};
  ASSERT_EQ(sigaction(SIGUSR1, nullptr, &after), 0);
  EXPECT_EQ(after.sa_handler, SIG_IGN);
  {
    // A new policy starts clear of the earlier signal.
    const ExitPolicy again(ExitPlan{SIGUSR1, std::nullopt, std::nullopt}, Clock::now());
    EXPECT_FALSE(again.signal(mine).has_value());
  }
  sigaction(SIGUSR1, &before, nullptr);
}

}  // namespace
}  // namespace megatron::train
