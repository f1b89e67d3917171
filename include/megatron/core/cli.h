// Command-line helpers shared by the tools (which parse with CLI11): unknown-flag reports that
// name the nearest known flag, and one message for all problems of a command line.
#pragma once

#include <string>
#include <vector>

namespace megatron {

// For each argument in `extras` that looks like a flag ("--x" or "--x=v"), a problem message
// "unknown flag --x" plus "; did you mean --y?" when a known flag is close. Non-flag extras are
// reported as unexpected arguments.
std::vector<std::string> unknown_flag_problems(const std::vector<std::string>& extras,
                                               const std::vector<std::string>& known_flags);

// Throws megatron::Error listing every problem (one per line) when there is any.
void throw_if_problems(const std::string& context, const std::vector<std::string>& problems);

}  // namespace megatron
