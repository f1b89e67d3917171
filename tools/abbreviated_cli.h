// CLI11 parsing with argparse's abbreviated long flags, for the tools whose Megatron originals
// (tools/preprocess_data.py, tools/merge_datasets.py) parse with argparse's default allow_abbrev.
// megatron_train does not use it: Megatron's training parser sets allow_abbrev=False.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <map>
#include <string>
#include <vector>

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

// Spells abbreviated flags in full (megatron::expand_flag_abbreviations), then parses with CLI11
// (`app` allows extras), whose ParseError propagates. Returns the problems: ambiguous
// abbreviations, then unknown flags (with the nearest known one) and stray arguments.
inline std::vector<std::string> parse_abbreviated(CLI::App& app, int argc, const char* const* argv,
                                                  const std::map<std::string, std::string, std::less<>>& aliases = {}) {
  const auto spellings = option_spellings(app);
  auto expanded = expand_flag_abbreviations(command_line_args(argc, argv), spellings, aliases);
  std::reverse(expanded.args.begin(), expanded.args.end());  // CLI11 takes the vector last-first
  app.parse(expanded.args);
  std::vector<std::string> known;
  for (const auto& option : spellings) known.insert(known.end(), option.begin(), option.end());
  for (auto& problem : unknown_flag_problems(app.remaining(), known, expanded.ambiguous)) {
    expanded.problems.push_back(std::move(problem));
  }
  return expanded.problems;
}

}  // namespace megatron::tools
