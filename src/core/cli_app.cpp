// CLI11 parsing with argparse's rules (see cli_app.h).
#include "megatron/core/cli_app.h"

#include <algorithm>
#include <cctype>
#include <iostream>

#include "megatron/core/check.h"
#include "megatron/core/cli.h"
#include "megatron/core/log.h"

namespace megatron {
namespace {

// argparse takes "-1" and "-.5" as values, not flags (no option here looks like a number).
bool looks_like_flag(const std::string& arg) {
  return arg.size() >= 2 && arg[0] == '-' && !std::isdigit(static_cast<unsigned char>(arg[1])) && arg[1] != '.';
}

}  // namespace

std::vector<std::vector<std::string>> option_spellings(const CLI::App& app) {
  std::vector<std::vector<std::string>> spellings;
  for (const CLI::Option* option : app.get_options()) {
    spellings.emplace_back();
    for (const auto& name : option->get_lnames()) spellings.back().push_back("--" + name);
  }
  return spellings;
}

std::vector<std::string> keep_last_occurrences(std::vector<std::string>& args, const CLI::App& app) {
  struct Occurrence {
    std::size_t begin, end;  // the flag and its values: args[begin, end)
    std::string flag;
    std::vector<std::string> values;
  };
  std::vector<const CLI::Option*> order;  // options by first occurrence
  std::map<const CLI::Option*, std::vector<Occurrence>> seen;
  for (std::size_t i = 0; i < args.size() && args[i] != "--"; ++i) {
    if (args[i].rfind("--", 0) != 0) continue;
    const auto eq = args[i].find('=');
    const CLI::Option* option = app.get_option_no_throw(args[i].substr(0, eq));
    if (option == nullptr) continue;
    Occurrence occurrence{i, i + 1, args[i].substr(0, eq), {}};
    if (eq != std::string::npos) occurrence.values.push_back(args[i].substr(eq + 1));
    while (eq == std::string::npos && occurrence.end < args.size() &&
           static_cast<int>(occurrence.values.size()) < option->get_items_expected_max() &&
           args[occurrence.end] != "--" && !looks_like_flag(args[occurrence.end])) {
      occurrence.values.push_back(args[occurrence.end++]);
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
    if (option->get_items_expected_max() > 0) notes.push_back(repeated_flag_note(all.back().flag, all.size(), all.back().values));
    dropped.insert(dropped.end(), all.begin(), all.end() - 1);
  }
  std::sort(dropped.begin(), dropped.end(), [](const auto& a, const auto& b) { return a.begin > b.begin; });
  for (const auto& occurrence : dropped) {
    args.erase(args.begin() + static_cast<std::ptrdiff_t>(occurrence.begin),
               args.begin() + static_cast<std::ptrdiff_t>(occurrence.end));
  }
  return notes;
}

std::vector<std::string> parse_abbreviated(CLI::App& app, int argc, const char* const* argv,
                                           std::vector<std::string>& notes,
                                           const std::map<std::string, std::string, std::less<>>& aliases) {
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

int usage_error(const CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
  throw_error("invalid command line: " + std::string(e.what()) + "; run with --help for the flags");
}

std::optional<int> parse_command_line(CLI::App& app, int argc, const char* const* argv, const char* tool,
                                      std::vector<std::string>& problems) {
  std::vector<std::string> notes;
  try {
    for (auto& problem : parse_abbreviated(app, argc, argv, notes)) problems.push_back(std::move(problem));
  } catch (const CLI::ParseError& e) {
    return usage_error(app, e);
  }
  const Log log(std::cerr, tool);
  for (const auto& note : notes) log.line(note);
  return std::nullopt;
}

}  // namespace megatron
