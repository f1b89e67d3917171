// The project's one error idiom. MEGATRON_CHECK(cond, parts...) throws megatron::Error with the
// parts streamed together when cond is false; MEGATRON_FAIL(parts...) throws unconditionally.
// Only a tool's main() catches, prints what() and exits non-zero. Messages are for users: say
// what was wrong, where (file:line, flag, rank) and what to do about it.
#pragma once

#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace megatron {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Parts>
std::string str_cat(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  return out.str();
}

[[noreturn]] void throw_error(std::string message);

// Error from a failed system call: appends strerror(errno) to the message.
[[noreturn]] void throw_system_error(std::string message);

// For destructors, which must not throw: prints the error as the tools print theirs
// ("megatron: error: <what>") and flushes; abort_on_error then ends the process (a launcher ends
// the other ranks).
void report_error(const std::exception& e) noexcept;
[[noreturn]] void abort_on_error(const std::exception& e) noexcept;

// Problems found together are reported together. kList: "<context>:" and one indented line per
// problem ("\n  <problem>"). kCounted (the command-line form): "<context>: <problem>" for one,
// "<context>: N problems:" and the indented lines for more.
enum class ProblemHeading { kList, kCounted };

// Throws megatron::Error with every problem when there is any.
void throw_if_problems(std::string_view context, const std::vector<std::string>& problems,
                       ProblemHeading heading = ProblemHeading::kCounted);

}  // namespace megatron

#define MEGATRON_FAIL(...) ::megatron::throw_error(::megatron::str_cat(__VA_ARGS__))

#define MEGATRON_CHECK(cond, ...)                                     \
  do {                                                                \
    if (__builtin_expect(!(cond), 0)) {                                       \
      ::megatron::throw_error(::megatron::str_cat(__VA_ARGS__));      \
    }                                                                 \
  } while (false)

// Internal invariants (a bug in this project, not in the user's input): names the source line.
#define MEGATRON_ASSERT(cond, ...)                                                        \
  do {                                                                                    \
    if (__builtin_expect(!(cond), 0)) {                                                           \
      ::megatron::throw_error(::megatron::str_cat("internal error at ", __FILE__, ":",     \
                                                  __LINE__, ": ", #cond, " failed. ",     \
                                                  ##__VA_ARGS__));                        \
    }                                                                                     \
  } while (false)
