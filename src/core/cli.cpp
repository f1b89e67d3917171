// Unknown-flag suggestions and problem lists (see cli.h).
#include "megatron/core/cli.h"

#include "megatron/core/check.h"
#include "megatron/core/strings.h"

namespace megatron {

std::vector<std::string> unknown_flag_problems(const std::vector<std::string>& extras,
                                               const std::vector<std::string>& known_flags) {
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
    std::string message = "unknown flag " + flag;
    const std::string nearest = closest_match(flag, known_flags);
    if (!nearest.empty()) message += "; did you mean " + nearest + "?";
    problems.push_back(message);
  }
  return problems;
}

void throw_if_problems(const std::string& context, const std::vector<std::string>& problems) {
  if (problems.empty()) return;
  std::string message = context + (problems.size() == 1 ? ": " : ": " + std::to_string(problems.size()) + " problems:");
  if (problems.size() == 1) {
    message += problems.front();
  } else {
    for (const auto& p : problems) message += "\n  " + p;
  }
  throw_error(message);
}

}  // namespace megatron
