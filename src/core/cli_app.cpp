// CLI11 parsing with argparse's rules for the tools whose Megatron originals
// (tools/preprocess_data.py, tools/merge_datasets.py) parse with argparse's defaults: abbreviated
// long flags, the last occurrence of a repeated flag wins (with a note), a parse error is a usage
// error (exit 1, the tool's name; see megatron/core/tool_main.h). megatron_train does not use it:
// Megatron's training parser sets allow_abbrev=False (it has its own reader with the same rules).
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "megatron/core/check.h"
#include "megatron/core/cli.h"

namespace megatron::tools {

// Each option's long spellings ("--x"), one entry per option.
inline std::vector<std::vector<std::string>> option_spellings(const CLI::App& app) {
  std::vector<std::vector<std::string>> spellings;
  for (const CLI::Option* option : app.get_options()) {
    spellings.emplace_back();
    for (const auto& name : option->get_lnames()) spellings.back().push_back("--" + name);
  }
  return spellings;
}

// argparse takes "-1" and "-.5" as values, not flags (no option here looks like a number).
inline bool looks_like_flag(const std::string& arg) {
  return arg.size() >= 2 && arg[0] == '-' && !std::isdigit(static_cast<unsigned char>(arg[1])) && arg[1] != '.';
}

// argparse's rule for a flag given more than once: the last occurrence wins. Removes from `args`
// (flags spelled in full) the earlier occurrences of each option of `app`, with their values, and
// returns a note for each option given more than once with a value:
// "note: --workers given 2 times; the last value (4) is used".
inline std::vector<std::string> keep_last_occurrences(std::vector<std::string>& args, const CLI::App& app) {
  struct Occurrence {
    std::size_t begin, end;  // the flag and its values: args[begin, end)
    std::string flag, value;
  };
  std::vector<const CLI::Option*> order;  // options by first occurrence
  std::map<const CLI::Option*, std::vector<Occurrence>> seen;
  for (std::size_t i = 0; i < args.size() && args[i] != "--"; ++i) {
    if (args[i].rfind("--", 0) != 0) continue;
    const auto eq = args[i].find('=');
    const CLI::Option* option = app.get_option_no_throw(args[i].substr(0, eq));
    if (option == nullptr) continue;
    Occurrence occurrence{i, i + 1, args[i].substr(0, eq), eq == std::string::npos ? "" : args[i].substr(eq + 1)};
    if (eq == std::string::npos) {
      for (int taken = 0; occurrence.end < args.size() && taken < option->get_items_expected_max() &&
                          args[occurrence.end] != "--" && !looks_like_flag(args[occurrence.end]);
           ++taken) {
        occurrence.value += (taken == 0 ? "" : " ") + args[occurrence.end++];
      }
    }
    if (!seen.contains(option)) order.push_back(option);
    i = occurrence.end - 1;
    seen[option].push_back(std::move(occurrence));
  }
  std::vector<std::string> notes;
  std::vector<Occurrence> dropped;
  for (const CLI::Option* option : order) {
    auto& all = seen[option];
    if (all.size() < 2) continue;
    if (option->get_items_expected_max() > 0) {
      const bool several = all.back().value.find(' ') != std::string::npos;
      notes.push_back("note: " + all.back().flag + " given " + std::to_string(all.size()) + " times; the last " +
                      (several ? "values (" : "value (") + all.back().value + (several ? ") are used" : ") is used"));
    }
    dropped.insert(dropped.end(), all.begin(), all.end() - 1);
  }
  std::sort(dropped.begin(), dropped.end(), [](const auto& a, const auto& b) { return a.begin > b.begin; });
  for (const auto& occurrence : dropped) {
    args.erase(args.begin() + static_cast<std::ptrdiff_t>(occurrence.begin),
               args.begin() + static_cast<std::ptrdiff_t>(occurrence.end));
  }
  return notes;
}

// Spells abbreviated flags in full (megatron::expand_flag_abbreviations), keeps the last
// occurrence of repeated flags (appending a note per such flag to `notes`), then parses with CLI11
// (`app` allows extras), whose ParseError propagates (see usage_error). Returns the problems:
// ambiguous abbreviations, then unknown flags (with the nearest known one) and stray arguments.
inline std::vector<std::string> parse_abbreviated(CLI::App& app, int argc, const char* const* argv,
                                                  std::vector<std::string>& notes,
                                                  const std::map<std::string, std::string, std::less<>>& aliases = {}) {
  const auto spellings = option_spellings(app);
  auto expanded = expand_flag_abbreviations(command_line_args(argc, argv), spellings, aliases);
  for (auto& note : keep_last_occurrences(expanded.args, app)) notes.push_back(std::move(note));
  std::reverse(expanded.args.begin(), expanded.args.end());  // CLI11 takes the vector last-first
  app.parse(expanded.args);
  std::vector<std::string> known;
  for (const auto& option : spellings) known.insert(known.end(), option.begin(), option.end());
  for (auto& problem : unknown_flag_problems(app.remaining(), known, expanded.ambiguous)) {
    expanded.problems.push_back(std::move(problem));
  }
  return expanded.problems;
}

// A CLI11 parse error: --help prints the help and gives exit status 0; anything else is a usage
// error, thrown as megatron::Error for run_tool to print with the tool's name (exit status 1).
inline int usage_error(const CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
  throw_error("invalid command line: " + std::string(e.what()) + "; run with --help for the flags");
}

// The whole command line of a simple tool: parse_abbreviated, the notes printed on standard error
// as "<tool>: note", the problems appended to `problems` (the caller adds its own, then throws them
// together). Returns an exit status when the tool must stop here (--help: 0); throws on a usage error.
inline std::optional<int> parse_command_line(CLI::App& app, int argc, const char* const* argv, const char* tool,
                                             std::vector<std::string>& problems) {
  std::vector<std::string> notes;
  try {
    for (auto& problem : parse_abbreviated(app, argc, argv, notes)) problems.push_back(std::move(problem));
  } catch (const CLI::ParseError& e) {
    return usage_error(app, e);
  }
  for (const auto& note : notes) std::fprintf(stderr, "%s: %s\n", tool, note.c_str());
  return std::nullopt;
}

}  // namespace megatron::tools
