// LibTorch's errors as one line (see torch_errors.h).
#include "megatron/core/torch_errors.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>

#include "megatron/core/check.h"
#include "megatron/core/tool_main.h"

namespace megatron {

std::string torch_error_line(const c10::Error& e) {
  const std::string text = e.what_without_backtrace();
  std::string out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::size_t first = text.find_first_not_of(" \t", start);
    if (first < end) out += (out.empty() ? "" : "; ") + text.substr(first, end - first);
    start = end + 1;
  }
  return "LibTorch: " + out;
}

void with_one_line_torch_errors(const std::function<void()>& body) {
  try {
    body();
  } catch (const c10::Error& e) {
    const char* backtrace = std::getenv("MEGATRON_BACKTRACE");
    if (backtrace != nullptr && *backtrace != '\0' && std::string(backtrace) != "0") throw;
    throw Error(torch_error_line(e));
  }
}

int run_torch_tool(std::string_view tool, const std::function<int()>& body) {
  return run_tool(tool, [&] {
    int status = 1;
    with_one_line_torch_errors([&] { status = body(); });
    return status;
  });
}

}  // namespace megatron
