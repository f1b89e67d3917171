// Python float repr (checked against CPython's repr output), edit distance, flag suggestions.
#include <gtest/gtest.h>

#include "megatron/core/check.h"
#include "megatron/core/cli.h"
#include "megatron/core/strings.h"

namespace megatron {
namespace {

TEST(PythonFloatRepr, MatchesCPython) {
  // Expected strings printed by CPython 3.11's repr().
  const std::vector<std::pair<double, std::string>> cases = {
      {0.0, "0.0"},
      {1.0, "1.0"},
      {3051.234567890123, "3051.234567890123"},
      {1.0 / 3.0, "0.3333333333333333"},
      {2.5e-5, "2.5e-05"},
      {1e16, "1e+16"},
      {123456789012345678.0, "1.2345678901234568e+17"},
      {0.0001, "0.0001"},
      {0.00001234, "1.234e-05"},
      {-1.5, "-1.5"},
      {1e22, "1e+22"},
      {7.63e-7, "7.63e-07"},
      {100.0, "100.0"},
      {1234567.125, "1234567.125"},
      {5e-324, "5e-324"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {9999999999999998.0, "9999999999999998.0"},
  };
  for (const auto& [value, expected] : cases) EXPECT_EQ(python_float_repr(value), expected);
}

TEST(EditDistance, CountsInsertDeleteSubstituteAndSwap) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("abc", "abc"), 0u);
  EXPECT_EQ(edit_distance("abc", "abd"), 1u);
  EXPECT_EQ(edit_distance("abc", "ab"), 1u);
  EXPECT_EQ(edit_distance("abc", "acb"), 1u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(ClosestMatch, SuggestsTyposOnly) {
  const std::vector<std::string> flags = {"--append-eod", "--json-keys", "--workers", "--input"};
  EXPECT_EQ(closest_match("--apend-eod", flags), "--append-eod");
  EXPECT_EQ(closest_match("--json-key", flags), "--json-keys");
  EXPECT_EQ(closest_match("--completely-different", flags), "");
}

TEST(UnknownFlagProblems, NamesTheNearestFlagAndSkipsItsValue) {
  const std::vector<std::string> known = {"--workers", "--input"};
  const auto problems = unknown_flag_problems({"--wrokers", "4", "stray", "--zzzzzzzz=1"}, known);
  ASSERT_EQ(problems.size(), 3u);
  EXPECT_EQ(problems[0], "unknown flag --wrokers; did you mean --workers?");
  EXPECT_EQ(problems[1], "unexpected argument 'stray'");
  EXPECT_EQ(problems[2], "unknown flag --zzzzzzzz");
}

TEST(ThrowIfProblems, ReportsEveryProblemTogether) {
  EXPECT_NO_THROW(throw_if_problems("cmd", {}));
  try {
    throw_if_problems("invalid command line", {"first", "second"});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "invalid command line: 2 problems:\n  first\n  second");
  }
}

TEST(HumanBytes, UsesBinaryUnits) {
  EXPECT_EQ(human_bytes(512), "512 B");
  EXPECT_EQ(human_bytes(1536), "1.50 KiB");
  EXPECT_EQ(human_bytes(3ULL << 30), "3.00 GiB");
}

TEST(MegatronCheck, ThrowsWithTheStreamedMessage) {
  try {
    MEGATRON_CHECK(1 + 1 == 3, "value ", 42, " is wrong");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "value 42 is wrong");
  }
}

}  // namespace
}  // namespace megatron
