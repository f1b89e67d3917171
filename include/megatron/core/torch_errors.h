// LibTorch's errors as the tools print them: one line with the message and its context, without
// the C++ stack trace c10::Error::what() carries (MEGATRON_BACKTRACE=1 in the environment keeps
// it, for developers). The LibTorch half of core (library megatron::torch_errors): only the
// tools and libraries that link LibTorch include it; tool_main.h itself knows nothing of LibTorch.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace c10 {
class Error;
}

namespace megatron {

// "LibTorch: <message>; <context line>; ...", from what_without_backtrace().
std::string torch_error_line(const c10::Error& e);

// Runs body(); a c10::Error it throws is rethrown as megatron::Error(torch_error_line(e)), unless
// MEGATRON_BACKTRACE is set to anything but "" or "0" (then it goes on as it is).
void with_one_line_torch_errors(const std::function<void()>& body);

// run_tool (tool_main.h) for a tool that links LibTorch: its errors as one line, as above.
int run_torch_tool(std::string_view tool, const std::function<int()>& body);

}  // namespace megatron
