// Python float repr (checked against CPython's repr output), Python number parsing (against CPython's
// float() and int()), edit distance, flag suggestions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

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

// Expectations from CPython 3.11's float() and int() on the same text.
TEST(PythonNumberText, FloatAcceptsWhatPythonAccepts) {
  const std::vector<std::pair<const char*, double>> cases = {
      {" +1.5 ", 1.5}, {"1_000.5", 1000.5}, {".5", 0.5}, {"5.", 5.0}, {"-2e3", -2000.0}, {"1E+2", 100.0},
      {"\t7\n", 7.0}, {"1e-400", 0.0}, {"3", 3.0}};
  for (const auto& [text, value] : cases) {
    const std::optional<double> parsed = parse_python_float(text);
    ASSERT_TRUE(parsed.has_value()) << text;
    EXPECT_EQ(*parsed, value) << text;
  }
  EXPECT_EQ(parse_python_float("Infinity"), std::numeric_limits<double>::infinity());
  EXPECT_EQ(parse_python_float("-inf"), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(parse_python_float("1e400"), std::numeric_limits<double>::infinity());  // overflow is inf
  EXPECT_EQ(parse_python_float("-1e400"), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(*parse_python_float("nAn")));
  for (const char* bad : {"", " ", "x1", "1__0", "_1", "1_", "0x10", "0x1p3", "1.2.3", "--1", "+-1", "1 2", "1e_5",
                          "1_e5", "nan(1)", "e5", ".", "1e"}) {
    EXPECT_FALSE(parse_python_float(bad).has_value()) << "'" << bad << "'";
  }
}

TEST(PythonNumberText, IntAcceptsWhatPythonAccepts) {
  const std::vector<std::pair<const char*, std::int64_t>> cases = {
      {"42", 42}, {" -7 ", -7}, {"+0", 0}, {"1_000", 1000}, {"007", 7},
      {"9223372036854775807", std::numeric_limits<std::int64_t>::max()}};
  for (const auto& [text, value] : cases) {
    const std::optional<std::int64_t> parsed = parse_python_int(text);
    ASSERT_TRUE(parsed.has_value()) << text;
    EXPECT_EQ(*parsed, value) << text;
  }
  // Python errors, and one Python value that does not fit 64 bits.
  for (const char* bad : {"", "1.0", "1e3", "_1", "1__0", "0x10", "- 1", "inf", "9223372036854775808"}) {
    EXPECT_FALSE(parse_python_int(bad).has_value()) << "'" << bad << "'";
  }
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

// Expected values from Python's shlex.quote.
TEST(ShellWord, QuotesAsShlexQuoteDoes) {
  EXPECT_EQ(shell_word("--moe-layer-freq"), "--moe-layer-freq");
  EXPECT_EQ(shell_word("a_b@%+=:,./-Z9"), "a_b@%+=:,./-Z9");
  EXPECT_EQ(shell_word("[0,1,0,1]"), "'[0,1,0,1]'");
  EXPECT_EQ(shell_word("/a b/c"), "'/a b/c'");
  EXPECT_EQ(shell_word("it's"), "'it'\"'\"'s'");
  EXPECT_EQ(shell_word(""), "''");
  EXPECT_EQ(shell_word("x$y"), "'x$y'");
  EXPECT_EQ(shell_word("\xc3\xa9"), "'\xc3\xa9'");
}

TEST(Split, GivesThePiecesBetweenSeparators) {
  EXPECT_EQ(split("--a,--b", ','), (std::vector<std::string>{"--a", "--b"}));
  EXPECT_EQ(split("a||b", '|'), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(split("only", ','), (std::vector<std::string>{"only"}));
  EXPECT_TRUE(split("", ',').empty());
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
