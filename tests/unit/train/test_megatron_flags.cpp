// Every flag of Megatron's pretrain_gpt.py parser (the list scripts/megatron_flags.py reads from
// Megatron-LM's own parser) is known to megatron_train: parsed as a field with Megatron's kind and
// choices, accepted with a note, or refused by name with the reason; never "unknown".
#include <gtest/gtest.h>

#include <set>

#include "argument_fields.h"
#include "argument_test_support.h"
#include "megatron/core/strings.h"
#include "megatron_flags.h"
#include "test_support.h"

namespace megatron::train {
namespace {

using megatron::testing::expect_contains;
using namespace testing;  // the command lines
using detail::FieldSpec;
using detail::FlagKind;
using detail::MegatronFlag;

// A value argparse takes for the flag: its first choice, else a number for int and float.
Args given(std::string_view name, const MegatronFlag& flag) {
  Args args{std::string(name)};
  const FlagKind kind = detail::flag_kind(flag);
  if (kind == FlagKind::kStoreTrue || kind == FlagKind::kStoreFalse) return args;
  if (!flag.choices.empty()) {
    args.push_back(split(flag.choices, '|').front());
  } else {
    args.push_back(flag.type == "float" ? "0.5" : "1");
  }
  return args;
}

// Every field of the flag table with its flag names.
std::vector<std::pair<FieldSpec, std::vector<std::string>>> table() {
  std::vector<std::pair<FieldSpec, std::vector<std::string>>> out;
  const Arguments defaults;
  detail::for_each_field(defaults, [&](const FieldSpec& spec, const auto&) {
    if (!spec.flags.empty()) out.emplace_back(spec, split(spec.flags, ','));
  });
  return out;
}

TEST(MegatronFlags, TheListIsMegatronsWholeParser) {
  // core_v0.12.0 and core_v0.19.0 together: 836 flags, 874 spellings (aliases included).
  std::size_t spellings = 0;
  for (const auto& flag : detail::megatron_flags()) spellings += split(flag.flags, ',').size();
  EXPECT_EQ(detail::megatron_flags().size(), 836u);
  EXPECT_EQ(spellings, 874u);
}

TEST(MegatronFlags, NoSpellingIsUnknown) {
  for (const auto& flag : detail::megatron_flags()) {
    for (const auto& name : split(flag.flags, ',')) {
      SCOPED_TRACE(name);
      std::vector<std::string> messages;
      std::string problem;
      try {
        parse_arguments(with(base(), given(name, flag)), collecting(messages));
      } catch (const std::exception& e) {
        problem = e.what();
      }
      EXPECT_EQ(problem.find("unknown flag"), std::string::npos) << problem;
      EXPECT_EQ(problem.find("unexpected argument"), std::string::npos) << problem;
    }
  }
}

TEST(MegatronFlags, EachFlagOutsideTheTableHasARule) {
  std::set<std::string> in_table;
  for (const auto& [spec, names] : table()) in_table.insert(names.begin(), names.end());
  std::set<std::string_view> used;
  for (const auto& flag : detail::megatron_flags()) {
    const auto names = split(flag.flags, ',');
    if (std::any_of(names.begin(), names.end(), [&](const std::string& n) { return in_table.contains(n); })) continue;
    const detail::FlagRule* rule = detail::rule_for(flag);
    ASSERT_NE(rule, nullptr) << flag.flags << " (group '" << flag.group << "') has no rule";
    EXPECT_FALSE(rule->why.empty()) << flag.flags;
    used.insert(rule->pattern);
  }
  // A rule no flag of the list reaches is a misspelt pattern (or a flag Megatron removed).
  for (const auto& rule : detail::flag_rules()) EXPECT_TRUE(used.contains(rule.pattern)) << rule.pattern << " matches no flag";
}

TEST(MegatronFlags, TheTableTakesValuesAsMegatronDoes) {
  for (const auto& [spec, names] : table()) {
    for (const auto& flag : detail::megatron_flags()) {
      const auto theirs = split(flag.flags, ',');
      if (std::none_of(theirs.begin(), theirs.end(), [&](const std::string& n) { return n == names.front(); })) continue;
      SCOPED_TRACE(flag.flags);
      EXPECT_EQ(detail::flag_kind(flag), spec.kind);
      for (const auto& alias : theirs) {  // every spelling Megatron accepts is one of ours
        EXPECT_NE(std::find(names.begin(), names.end(), alias), names.end()) << alias;
      }
      if (!spec.choices.megatron.empty()) {  // every version's choices, in any order
        const std::set<std::string> ours(spec.choices.megatron.begin(), spec.choices.megatron.end());
        const auto listed = split(flag.choices, '|');
        EXPECT_EQ(ours, std::set<std::string>(listed.begin(), listed.end()));
      }
    }
  }
}

TEST(MegatronFlags, NotedFlagsWarnAndCheckTheirValues) {
  std::vector<std::string> messages;
  parse_arguments(with(base(), {"--ddp-num-buckets", "4", "--manual-gc", "--inference-max-requests", "8"}), collecting(messages));
  const std::string all = join(messages, "\n");
  expect_contains(all, {"WARNING: --ddp-num-buckets is ignored: size the gradient buckets with --ddp-bucket-size"});
  expect_contains(all, {"WARNING: --manual-gc is ignored: there is no Python garbage collector to steer"});
  expect_contains(all, {"WARNING: --inference-max-requests is ignored: only Megatron's inference engines"});
  // argparse's own checks still apply to a flag that is only noted.
  expect_contains(problem_of(with(base(), {"--ddp-num-buckets", "four"})), {"argument --ddp-num-buckets: invalid int value: 'four'"});
  expect_contains(problem_of(with(base(), {"--empty-unused-memory-level", "3"})),
                  {"argument --empty-unused-memory-level: invalid choice: '3' (choose from '0', '1', '2')"});
  expect_contains(problem_of(with(base(), {"--manual-gc=yes"})), {"argument --manual-gc: ignored explicit argument"});
  expect_contains(problem_of(with(base(), {"--ddp-num-buckets"})), {"argument --ddp-num-buckets: expected one argument"});
}

TEST(MegatronFlags, RefusedFlagsSayWhyAndHarmlessValuesPass) {
  expect_contains(problem_of(with(base(), {"--calculate-per-token-loss"})),
                  {"--calculate-per-token-loss is not supported by this build yet: per-token loss averaging"});
  expect_contains(problem_of(with(base(), {"--fp8-recipe", "delayed"})), {"--fp8-recipe is not supported by this build yet: FP8"});
  expect_contains(problem_of(with(base(), {"--img-h", "224", "--rerun-mode", "validate_results"})),
                  {"--rerun-mode validate_results is not supported by this build yet: the result-validating rerun engine"});
  expect_contains(problem_of(with(base(), {"--exp-avg-dtype", "bf16"})), {"--exp-avg-dtype bf16 is not supported by this build yet"});
  std::vector<std::string> messages;
  parse_arguments(with(base(), {"--exp-avg-dtype", "fp32", "--rerun-mode", "disabled", "--softmax-type", "vanilla"}), collecting(messages));
  for (const auto& message : messages) {
    EXPECT_EQ(message.find("--exp-avg-dtype"), std::string::npos) << message;
    EXPECT_EQ(message.find("--rerun-mode"), std::string::npos) << message;
  }
}

TEST(MegatronFlags, OlderMegatronNamesAreKnown) {
  expect_contains(problem_of(with(base(), {"--checkpoint-num-layers", "1"})),
                  {"--checkpoint-num-layers is not supported by this build yet: an older Megatron name"});
  expect_contains(problem_of(with(base(), {"--checkpoint-activations"})),
                  {"--checkpoint-activations is not supported by this build yet: an older Megatron name"});
}

}  // namespace
}  // namespace megatron::train
