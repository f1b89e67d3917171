// Megatron's start-up report around the trainer's setup: "time to initialize megatron", the
// datetime lines after each phase (each after a barrier over all ranks, as print_datetime), and
// the setup timers (started after a barrier, as Megatron's timers(..., barrier=True)) printed by
// the last rank as the min and max across ranks.
#pragma once

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

#include "megatron/parallel/communicator.h"

namespace megatron::train {

class StartupReport {
 public:
  // `rank0` and `last`: the streams of Megatron's print_rank_0 and print_rank_last (a dropping
  // stream on the other ranks).
  StartupReport(parallel::Communicator& comm, const parallel::ProcessGroup& world, std::ostream& rank0,
                std::ostream& last);

  // "time to initialize megatron (seconds): X" from the earliest process start across ranks, then
  // the datetime line "after megatron is initialized". Collective.
  void initialized();
  // "[what] datetime: ... " after a barrier. Collective.
  void datetime(const std::string& what);
  // A setup timer, started after a barrier (collective), stopped locally.
  void start(const std::string& timer);
  void stop(const std::string& timer);
  // Megatron's "(min, max) time across ranks (ms):" block of the timers stopped so far, by the
  // last rank. Collective.
  void log_timers();

 private:
  double max_across_ranks(double value);
  std::vector<double> max_across_ranks(std::vector<double> values);

  parallel::Communicator& comm_;
  const parallel::ProcessGroup& world_;
  std::ostream& rank0_;
  std::ostream& last_;
  struct Timer {
    std::string name;
    std::chrono::steady_clock::time_point started;
    double elapsed_ms = -1;  // -1 while running
  };
  std::vector<Timer> timers_;
};

}  // namespace megatron::train
