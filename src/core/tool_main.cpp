// Error printing, exit status and the standard-output check shared by the tools (see tool_main.h).
#include "megatron/core/tool_main.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <new>
#include <string>

namespace megatron {

void print_tool_error(std::string_view tool, std::string_view message) {
  std::cout.flush();
  std::fflush(stdout);
  std::fprintf(stderr, "%.*s: error: %.*s\n", static_cast<int>(tool.size()), tool.data(),
               static_cast<int>(message.size()), message.data());
}

bool check_standard_output(std::string_view tool) {
  errno = 0;
  std::cout.flush();  // in sync with stdio: this flushes stdout, and may be where the write fails
  const bool flushed = std::fflush(stdout) == 0;
  const int error = errno;
  if (flushed && !std::ferror(stdout) && !std::cout.fail()) return true;
  const std::string reason = error != 0 ? std::strerror(error) : "a write to it failed (a full disk or a closed pipe?)";
  std::clearerr(stdout);
  std::fprintf(stderr, "%.*s: error: cannot write to standard output: %s\n", static_cast<int>(tool.size()),
               tool.data(), reason.c_str());
  return false;
}

int run_tool(std::string_view tool, const std::function<int()>& body) {
  int status = 1;
  try {
    status = body();
  } catch (const std::bad_alloc&) {
    print_tool_error(tool, "out of memory (std::bad_alloc); lower the sizes the command line asks for");
    return 1;
  } catch (const std::exception& e) {
    print_tool_error(tool, e.what());
    return 1;
  } catch (...) {
    print_tool_error(tool, "unknown exception");
    return 1;
  }
  if (!check_standard_output(tool)) return 1;
  return status;
}

}  // namespace megatron
