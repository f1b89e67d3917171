// The end of every tool's main: each error is printed as "<tool>: error: <message>", every usage
// error and failure exits with status 1, and standard output is checked at exit (a full disk is
// an error, not a silent success). Knows nothing of LibTorch: the tools that link it call
// run_torch_tool (torch_errors.h), which turns a c10::Error into one line before it gets here.
#pragma once

#include <functional>
#include <string_view>

namespace megatron {

// Flushes standard output and prints "<tool>: error: <message>" on standard error.
void print_tool_error(std::string_view tool, std::string_view message);

// Flushes standard output (C and C++ streams). True when every write to it succeeded; otherwise
// prints "<tool>: error: cannot write to standard output: <reason>" and returns false.
bool check_standard_output(std::string_view tool);

// Runs body() and returns its exit status; anything it throws is printed with print_tool_error
// and gives 1. A status of 0 becomes 1 when standard output could not be written.
int run_tool(std::string_view tool, const std::function<int()>& body);

}  // namespace megatron
