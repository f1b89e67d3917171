// argparse's abbreviated long flags, the legacy-flag checks (core/cli.h) and the last occurrence
// of a repeated flag (core/cli_app.h). The expected
// spellings and messages are what Python 3.11's argparse (allow_abbrev=True) does and prints for
// the same option set, except that candidates are listed sorted and that spellings of one option
// count as one match here.
#include <gtest/gtest.h>

#include "megatron/core/cli.h"

#include <CLI/CLI.hpp>

#include "megatron/core/cli_app.h"

namespace megatron {
namespace {

// A few of preprocess_data's options, as Megatron's tool has them.
const std::vector<std::vector<std::string>> kKnown = {
    {"--input"}, {"--output-prefix"}, {"--lang"}, {"--log-interval"}, {"--vocab-file"},
    {"--vocab-size"}, {"--vocab-extra-ids"}, {"--merge-file"}, {"--workers"}, {"--save-interval", "--persistent-save-interval"}};

TEST(ExpandFlagAbbreviations, SpellsUniquePrefixesInFull) {
  const auto out = expand_flag_abbreviations({"--inp", "a.jsonl", "--output-p=out", "--merge", "m.txt", "--work", "4"}, kKnown);
  EXPECT_TRUE(out.problems.empty());
  EXPECT_EQ(out.args, (std::vector<std::string>{"--input", "a.jsonl", "--output-prefix=out", "--merge-file", "m.txt",
                                                "--workers", "4"}));
}

TEST(ExpandFlagAbbreviations, RefusesAnAmbiguousPrefixNamingTheCandidates) {
  const auto out = expand_flag_abbreviations({"--l", "x", "--vocab", "v.json"}, kKnown);
  ASSERT_EQ(out.problems.size(), 2u);
  EXPECT_EQ(out.problems[0], "ambiguous option: --l could match --lang, --log-interval");
  EXPECT_EQ(out.problems[1], "ambiguous option: --vocab could match --vocab-extra-ids, --vocab-file, --vocab-size");
  EXPECT_EQ(out.args, (std::vector<std::string>{"--l", "x", "--vocab", "v.json"}));
  EXPECT_EQ(out.ambiguous, (std::vector<std::string>{"--l", "--vocab"}));
  // Reported once: not again as unknown flags, and their values are not strays.
  EXPECT_EQ(unknown_flag_problems(out.args, {"--lang"}, out.ambiguous), std::vector<std::string>{});
}

TEST(ExpandFlagAbbreviations, AliasesWinOverAmbiguity) {
  const auto out = expand_flag_abbreviations({"--vocab", "v.json", "--vocab=w.json"}, kKnown, {{"--vocab", "--vocab-file"}});
  EXPECT_TRUE(out.problems.empty());
  EXPECT_EQ(out.args, (std::vector<std::string>{"--vocab-file", "v.json", "--vocab-file=w.json"}));
}

TEST(ExpandFlagAbbreviations, KeepsExactUnknownAndNonFlagArguments) {
  const auto out = expand_flag_abbreviations({"--lang", "--save", "7", "--nothing-like-it", "-h", "--", "--inp"}, kKnown);
  EXPECT_TRUE(out.problems.empty());
  // --save is a prefix of two spellings of one option: one match.
  EXPECT_EQ(out.args, (std::vector<std::string>{"--lang", "--save-interval", "7", "--nothing-like-it", "-h", "--", "--inp"}));
}

constexpr LegacyFlag kLegacy[] = {
    {"--dataset-impl", "lazy cached mmap", "mmap", "only mmap is written", "only mmap is written"},
    {"--chunk-size", "int", "", "batches are chosen here", ""},
    {"--legacy-tokenizer", "", "", "always legacy", ""},
};

TEST(CheckLegacyFlags, NotesWhatChangesNothing) {
  std::vector<std::string> notes, problems;
  check_legacy_flags(kLegacy, {{"--dataset-impl", "mmap"}, {"--chunk-size", "25"}, {"--legacy-tokenizer", ""}}, notes, problems);
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(notes, (std::vector<std::string>{
                       "note: --dataset-impl mmap (from older Megatron versions) is accepted and changes nothing: only mmap is written",
                       "note: --chunk-size 25 (from older Megatron versions) is accepted and changes nothing: batches are chosen here",
                       "note: --legacy-tokenizer (from older Megatron versions) is accepted and changes nothing: always legacy"}));
}

TEST(CheckLegacyFlags, RefusesValuesItCannotHonour) {
  std::vector<std::string> notes, problems;
  check_legacy_flags(kLegacy, {{"--dataset-impl", "lazy"}, {"--chunk-size", "x"}, {"--legacy-tokenizer", "1"}}, notes, problems);
  EXPECT_TRUE(notes.empty());
  EXPECT_EQ(problems, (std::vector<std::string>{"--dataset-impl lazy is not supported: only mmap is written",
                                                "argument --chunk-size: invalid int value: 'x'",
                                                "argument --legacy-tokenizer: ignored explicit argument '1'"}));
  problems.clear();
  check_legacy_flags(kLegacy, {{"--dataset-impl", "fast"}, {"--chunk-size", ""}}, notes, problems);
  EXPECT_EQ(problems, (std::vector<std::string>{"argument --dataset-impl: invalid choice: 'fast' (choose from 'lazy', 'cached', 'mmap')",
                                                "argument --chunk-size: expected one argument"}));
}

// argparse keeps the last occurrence of a repeated flag; CLI11 would take the first (or refuse).
TEST(KeepLastOccurrences, DropsEarlierOccurrencesWithANote) {
  CLI::App app;
  int workers = 0;
  std::vector<std::string> keys;
  bool append_eod = false;
  app.add_option("--workers", workers);
  app.add_option("--json-keys", keys)->expected(1, 8);
  app.add_flag("--append-eod", append_eod);
  std::vector<std::string> args = {"--workers", "2", "--json-keys", "a", "b", "--append-eod", "--workers=4",
                                   "--json-keys", "c", "--append-eod", "-5"};
  const std::vector<std::string> notes = keep_last_occurrences(args, app);
  EXPECT_EQ(notes, (std::vector<std::string>{"note: --workers given 2 times; the last value (4) is used",
                                             "note: --json-keys given 2 times; the last value (c) is used"}));
  EXPECT_EQ(args, (std::vector<std::string>{"--workers=4", "--json-keys", "c", "--append-eod", "-5"}));
  EXPECT_EQ(repeated_flag_note("--json-keys", 3, {"a", "b"}), "note: --json-keys given 3 times; the last values (a b) are used");
}

}  // namespace
}  // namespace megatron
