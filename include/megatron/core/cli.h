// Command-line helpers shared by the tools (which parse with CLI11): argparse's abbreviated long
// flags and old spellings, flags of older Megatron versions that are accepted with a note,
// unknown-flag reports that name the nearest known flag, and one message for all problems.
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace megatron {

// argv[1..argc) as strings.
std::vector<std::string> command_line_args(int argc, const char* const* argv);

// What expand_flag_abbreviations made of a command line.
struct ExpandedArgs {
  std::vector<std::string> args;      // flags spelled in full; everything else unchanged
  std::vector<std::string> problems;  // "ambiguous option: --l could match --lang, --log-interval"
  std::vector<std::string> ambiguous;  // those flags ("--l"), left as they were
};

// Python argparse's allow_abbrev (the default, as Megatron's tools/preprocess_data.py and
// tools/merge_datasets.py parse; its training parser turns it off): a long flag, or the name part
// of "--flag=value", that is not a known flag but starts exactly one of them stands for that
// flag. `known` holds one entry per option: its spellings, which count as one match. `aliases`
// map old exact spellings to a known flag first (e.g. "--vocab" -> "--vocab-file", which later
// Megatron versions made ambiguous). Unknown flags stay as they are, for the unknown-flag report;
// arguments after a lone "--" are not flags.
ExpandedArgs expand_flag_abbreviations(const std::vector<std::string>& args,
                                       const std::vector<std::vector<std::string>>& known,
                                       const std::map<std::string, std::string, std::less<>>& aliases = {});

// A flag of an older Megatron version that changes nothing here (e.g. --dataset-impl mmap).
struct LegacyFlag {
  std::string_view flag;
  std::string_view takes;     // "": a store_true flag; "int": an integer; else the choices, "a b c"
  std::string_view accepted;  // of the choices, those that change nothing ("a b")
  std::string_view note;      // why it changes nothing
  std::string_view refusal;   // why the other choices cannot be honoured
};

// Checks the legacy flags that were given: `given` maps a flag to its value (a store_true flag
// given without one maps to ""). Appends a one-line note per accepted flag to `notes`, and a
// problem per refused, invalid or missing value to `problems` (argparse's words where it has them).
void check_legacy_flags(std::span<const LegacyFlag> legacy, const std::map<std::string, std::string, std::less<>>& given,
                        std::vector<std::string>& notes, std::vector<std::string>& problems);

// For each argument in `extras` that looks like a flag ("--x" or "--x=v"), a problem message
// "unknown flag --x" plus "; did you mean --y?" when a known flag is close. Non-flag extras are
// reported as unexpected arguments. Flags in `reported` (e.g. ambiguous abbreviations) are
// skipped, with their values.
std::vector<std::string> unknown_flag_problems(const std::vector<std::string>& extras,
                                               const std::vector<std::string>& known_flags,
                                               const std::vector<std::string>& reported = {});

// argparse's rule for a flag given more than once is that the last occurrence wins; this is the
// note that says so: "note: --workers given 2 times; the last value (4) is used" (the values of
// the last occurrence; several make it "the last values (a b) are used").
std::string repeated_flag_note(std::string_view flag, std::size_t times, const std::vector<std::string>& values);


}  // namespace megatron
