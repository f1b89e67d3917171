#include "megatron/core/exit_signal.h"

#include <signal.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <utility>

#include "megatron/core/check.h"
#include "megatron/core/strings.h"

namespace megatron {
namespace {

// Catchable signals a scheduler or a user sends to ask for a clean stop.
constexpr std::pair<const char*, int> kSignals[] = {
    {"SIGTERM", SIGTERM}, {"SIGINT", SIGINT},   {"SIGHUP", SIGHUP},   {"SIGUSR1", SIGUSR1},
    {"SIGUSR2", SIGUSR2}, {"SIGQUIT", SIGQUIT}, {"SIGCONT", SIGCONT}, {"SIGXCPU", SIGXCPU},
};

using SigAction = struct sigaction;

volatile sig_atomic_t g_received = 0;
std::atomic<bool> g_installed{false};

extern "C" void record_exit_signal(int) { g_received = 1; }

}  // namespace

int parse_signal_name(const std::string& text, const std::string& flag) {
  std::string upper;
  for (char c : text) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper.rfind("SIG", 0) != 0) upper = "SIG" + upper;
  for (const auto& [name, number] : kSignals) {
    if (upper == name) return number;
  }
  char* end = nullptr;
  const long number = std::strtol(text.c_str(), &end, 10);
  if (!text.empty() && end != nullptr && *end == '\0') {
    for (const auto& [name, known] : kSignals) {
      if (known == number) return known;
    }
  }
  std::string names;
  for (const auto& [name, number_] : kSignals) names += (names.empty() ? "" : ", ") + std::string(name);
  MEGATRON_FAIL(flag, ": '", text, "' is not a signal this handler can catch; use one of ", names,
                " (or its number)");
}

std::string signal_name(int signo) {
  for (const auto& [name, number] : kSignals) {
    if (number == signo) return name;
  }
  return str_cat("signal ", signo);
}

ExitSignal::ExitSignal(int signo) : signo_(signo), previous_(new SigAction()) {
  MEGATRON_CHECK(!g_installed.exchange(true), "ExitSignal: one handler at a time");
  g_received = 0;
  SigAction action{};
  action.sa_handler = record_exit_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a blocking read or MPI wait resumes; the loop polls the flag
  if (sigaction(signo, &action, static_cast<SigAction*>(previous_)) != 0) {
    g_installed = false;
    delete static_cast<SigAction*>(previous_);
    MEGATRON_FAIL("cannot install a handler for ", signal_name(signo));
  }
}

ExitSignal::~ExitSignal() {
  sigaction(signo_, static_cast<SigAction*>(previous_), nullptr);
  delete static_cast<SigAction*>(previous_);
  g_installed = false;
}

bool ExitSignal::received() const { return g_received != 0; }

}  // namespace megatron
