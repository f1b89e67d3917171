// Out-of-line throwers for the MEGATRON_CHECK family (keeps the macro expansion small).
#include "megatron/core/check.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace megatron {

void throw_error(std::string message) { throw Error(std::move(message)); }

void report_error(const std::exception& e) noexcept {
  std::fprintf(stderr, "megatron: error: %s\n", e.what());
  std::fflush(stderr);
}

void abort_on_error(const std::exception& e) noexcept {
  report_error(e);
  std::abort();
}

void throw_if_problems(std::string_view context, const std::vector<std::string>& problems, ProblemHeading heading) {
  if (problems.empty()) return;
  std::string message(context);
  if (heading == ProblemHeading::kCounted && problems.size() == 1) throw Error(message + ": " + problems.front());
  message += heading == ProblemHeading::kCounted ? ": " + std::to_string(problems.size()) + " problems:" : ":";
  for (const auto& p : problems) message += "\n  " + p;
  throw Error(std::move(message));
}

void throw_system_error(std::string message) {
  const int err = errno;
  message += ": ";
  message += std::strerror(err);
  throw Error(std::move(message));
}

}  // namespace megatron
