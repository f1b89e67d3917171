// Megatron's start-up report (see startup_report.h).
#include "megatron/train/startup_report.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>

#include "megatron/core/check.h"
#include "megatron/train/training_log.h"

namespace megatron::train {

StartupReport::StartupReport(parallel::Communicator& comm, const parallel::ProcessGroup& world, std::ostream& rank0,
                             std::ostream& last)
    : comm_(comm), world_(world), rank0_(rank0), last_(last) {}

std::vector<double> StartupReport::max_across_ranks(std::vector<double> values) {
  at::Tensor t = at::tensor(values, at::kDouble);
  comm_.all_reduce(t, parallel::ReduceOp::kMax, world_).wait();
  const double* p = t.data_ptr<double>();
  return {p, p + values.size()};
}

double StartupReport::max_across_ranks(double value) { return max_across_ranks(std::vector<double>{value})[0]; }

void StartupReport::initialized() {
  // Megatron measures from the earliest start time across ranks: the longest time since start.
  const double seconds = max_across_ranks(seconds_since_process_start());
  char line[96];
  std::snprintf(line, sizeof(line), "time to initialize megatron (seconds): %.3f", seconds);
  rank0_ << line << std::endl;
  datetime("after megatron is initialized");
}

void StartupReport::datetime(const std::string& what) {
  comm_.barrier(world_).wait();
  rank0_ << format_datetime_line(what) << std::endl;
}

void StartupReport::start(const std::string& timer) {
  comm_.barrier(world_).wait();
  timers_.push_back({timer, std::chrono::steady_clock::now(), -1});
}

void StartupReport::stop(const std::string& timer) {
  const auto it = std::find_if(timers_.begin(), timers_.end(), [&](const Timer& t) { return t.name == timer; });
  MEGATRON_CHECK(it != timers_.end() && it->elapsed_ms < 0, "setup timer ", timer, " was not started");
  it->elapsed_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - it->started).count();
}

void StartupReport::log_timers() {
  comm_.barrier(world_).wait();
  std::vector<double> values;  // each timer's elapsed time, then its negation: max gives max and -min
  for (const Timer& t : timers_) values.push_back(t.elapsed_ms);
  for (const Timer& t : timers_) values.push_back(-t.elapsed_ms);
  if (values.empty()) return;
  const std::vector<double> reduced = max_across_ranks(values);
  std::vector<TimerRange> ranges;
  for (std::size_t i = 0; i < timers_.size(); ++i) {
    ranges.push_back({timers_[i].name, -reduced[timers_.size() + i], reduced[i]});
  }
  last_ << format_timer_block(ranges) << std::endl;
}

}  // namespace megatron::train
