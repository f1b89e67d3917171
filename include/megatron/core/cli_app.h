// CLI11 parsing with argparse's rules, for every tool: abbreviated long flags where the Megatron
// original allows them (tools/preprocess_data.py and tools/merge_datasets.py parse with argparse's
// defaults; Megatron's training parser sets allow_abbrev=False and only takes the last-occurrence
// rule from here), the last occurrence of a repeated flag wins (with a note), and a parse error is
// a usage error (exit 1, the tool's name; see megatron/core/tool_main.h). The CLI11-free pieces
// (abbreviation, legacy flags, unknown-flag reports) are in cli.h.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace megatron {

// Each option's long spellings ("--x"), one entry per option.
std::vector<std::vector<std::string>> option_spellings(const CLI::App& app);

// argparse's rule for a flag given more than once: the last occurrence wins. Removes from `args`
// (flags spelled in full) the earlier occurrences of each option of `app`, with their values, and
// returns a note for each option given more than once with a value (see repeated_flag_note).
std::vector<std::string> keep_last_occurrences(std::vector<std::string>& args, const CLI::App& app);

// Spells abbreviated flags in full (expand_flag_abbreviations), keeps the last occurrence of
// repeated flags (appending a note per such flag to `notes`), then parses with CLI11 (`app` allows
// extras), whose ParseError propagates (see usage_error). Returns the problems: ambiguous
// abbreviations, then unknown flags (with the nearest known one) and stray arguments.
std::vector<std::string> parse_abbreviated(CLI::App& app, int argc, const char* const* argv,
                                           std::vector<std::string>& notes,
                                           const std::map<std::string, std::string, std::less<>>& aliases = {});

// A CLI11 parse error: --help prints the help and gives exit status 0; anything else is a usage
// error, thrown as megatron::Error for run_tool to print with the tool's name (exit status 1).
int usage_error(const CLI::App& app, const CLI::ParseError& e);

// The whole command line of a simple tool: parse_abbreviated, the notes written to standard error
// through the tool's Log ("<tool>: note: ..."), the problems appended to `problems` (the caller adds
// its own, then throws them together). Returns an exit status when the tool must stop here
// (--help: 0); throws on a usage error.
std::optional<int> parse_command_line(CLI::App& app, int argc, const char* const* argv, const char* tool,
                                      std::vector<std::string>& problems);

}  // namespace megatron
