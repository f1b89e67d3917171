// Abbreviated flags, legacy flags, unknown-flag suggestions and problem lists (see cli.h).
#include "megatron/core/cli.h"

#include <algorithm>

#include "megatron/core/check.h"
#include "megatron/core/strings.h"

namespace megatron {

namespace {

std::vector<std::string_view> words(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const auto end = text.find(' ');
    if (end != 0) out.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return out;
}

bool is_int(std::string_view text) {
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) text.remove_prefix(1);
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::vector<std::string> command_line_args(int argc, const char* const* argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return args;
}

ExpandedArgs expand_flag_abbreviations(const std::vector<std::string>& args,
                                       const std::vector<std::vector<std::string>>& known,
                                       const std::map<std::string, std::string, std::less<>>& aliases) {
  ExpandedArgs out;
  bool only_values = false;
  for (const std::string& arg : args) {
    if (only_values || arg.size() <= 2 || arg.rfind("--", 0) != 0) {
      only_values |= arg == "--";
      out.args.push_back(arg);
      continue;
    }
    const auto eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const std::string rest = eq == std::string::npos ? "" : arg.substr(eq);
    const auto exact = [&](const std::vector<std::string>& spellings) {
      return std::find(spellings.begin(), spellings.end(), name) != spellings.end();
    };
    if (std::any_of(known.begin(), known.end(), exact)) {
      out.args.push_back(arg);
      continue;
    }
    if (const auto alias = aliases.find(name); alias != aliases.end()) {
      out.args.push_back(alias->second + rest);
      continue;
    }
    std::vector<std::string> matches;  // the first matching spelling of each matching option
    for (const auto& spellings : known) {
      for (const std::string& spelling : spellings) {
        if (spelling.rfind(name, 0) == 0) {
          matches.push_back(spelling);
          break;
        }
      }
    }
    if (matches.size() == 1) {
      out.args.push_back(matches.front() + rest);
      continue;
    }
    if (matches.size() > 1) {
      std::sort(matches.begin(), matches.end());
      out.problems.push_back("ambiguous option: " + name + " could match " + join(matches, ", "));
      out.ambiguous.push_back(name);
    }
    out.args.push_back(arg);
  }
  return out;
}

void check_legacy_flags(std::span<const LegacyFlag> legacy, const std::map<std::string, std::string, std::less<>>& given,
                        std::vector<std::string>& notes, std::vector<std::string>& problems) {
  for (const LegacyFlag& flag : legacy) {
    const auto it = given.find(flag.flag);
    if (it == given.end()) continue;
    const std::string& value = it->second;
    const std::string where = "argument " + std::string(flag.flag);
    const std::string spelled = std::string(flag.flag) + (flag.takes.empty() ? "" : " " + value);
    if (flag.takes.empty()) {
      if (!value.empty()) {
        problems.push_back(where + ": ignored explicit argument '" + value + "'");
        continue;
      }
    } else if (value.empty()) {
      problems.push_back(where + ": expected one argument");
      continue;
    } else if (flag.takes == "int") {
      if (!is_int(value)) {
        problems.push_back(where + ": invalid int value: '" + value + "'");
        continue;
      }
    } else {
      const auto choices = words(flag.takes);
      if (std::find(choices.begin(), choices.end(), value) == choices.end()) {
        std::vector<std::string> quoted;
        for (const auto choice : choices) quoted.push_back(std::string(1, '\'').append(choice).append(1, '\''));
        problems.push_back(where + ": invalid choice: '" + value + "' (choose from " + join(quoted, ", ") + ")");
        continue;
      }
      const auto accepted = words(flag.accepted);
      if (std::find(accepted.begin(), accepted.end(), value) == accepted.end()) {
        problems.push_back(spelled + " is not supported: " + std::string(flag.refusal));
        continue;
      }
    }
    notes.push_back("note: " + spelled + " (from older Megatron versions) is accepted and changes nothing: " +
                    std::string(flag.note));
  }
}

std::vector<std::string> unknown_flag_problems(const std::vector<std::string>& extras,
                                               const std::vector<std::string>& known_flags,
                                               const std::vector<std::string>& reported) {
  std::vector<std::string> problems;
  bool after_unknown_flag = false;
  for (const auto& arg : extras) {
    if (arg.rfind("--", 0) != 0) {
      // Most likely the value of the unknown flag before it: that flag is already reported.
      if (!after_unknown_flag) problems.push_back("unexpected argument '" + arg + "'");
      after_unknown_flag = false;
      continue;
    }
    after_unknown_flag = arg.find('=') == std::string::npos;
    const std::string flag = arg.substr(0, arg.find('='));
    if (std::find(reported.begin(), reported.end(), flag) != reported.end()) continue;
    std::string message = "unknown flag " + flag;
    const std::string nearest = closest_match(flag, known_flags);
    if (!nearest.empty()) message += "; did you mean " + nearest + "?";
    problems.push_back(message);
  }
  return problems;
}

std::string repeated_flag_note(std::string_view flag, std::size_t times, const std::vector<std::string>& values) {
  const bool several = values.size() > 1;
  return "note: " + std::string(flag) + " given " + std::to_string(times) + " times; the last " +
         (several ? "values (" : "value (") + join(values, " ") + (several ? ") are used" : ") is used");
}

}  // namespace megatron
