// Megatron's --exit-signal-handler: a signal (SIGTERM by default: what Slurm sends on scancel,
// on requeue and at the time limit) is recorded instead of killing the process, so the training
// loop can finish the current iteration, agree across ranks that one arrived, save a checkpoint
// and exit 0. The handler only sets a flag (async-signal-safe); the loop polls it.
#pragma once

#include <string>

namespace megatron {

// "SIGTERM", "TERM", "sigusr1" or a number -> the signal number. Throws megatron::Error naming
// `flag` and the accepted names for anything else (SIGKILL and SIGSTOP cannot be caught).
int parse_signal_name(const std::string& text, const std::string& flag);

// "SIGTERM" for SIGTERM; "signal N" for numbers without a name here.
std::string signal_name(int signo);

class ExitSignal {
 public:
  // Installs the recording handler for `signo`, replacing any earlier handler (the temporary
  // file cleanup's, whose work is moot when the process no longer dies of the signal). One
  // instance at a time; the destructor restores the previous disposition.
  explicit ExitSignal(int signo);
  ~ExitSignal();
  ExitSignal(const ExitSignal&) = delete;
  ExitSignal& operator=(const ExitSignal&) = delete;

  int signo() const { return signo_; }
  bool received() const;  // this process got the signal since construction

 private:
  int signo_;
  void* previous_;  // struct sigaction, kept opaque to spare includers <csignal>
};

}  // namespace megatron
