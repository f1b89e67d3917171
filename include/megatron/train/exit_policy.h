// When a run stops before --train-iters, as Megatron's checkpoint_and_decide_exit decides after
// each iteration: on the exit signal (--exit-signal-handler, checked before the regular save),
// then past --exit-duration-in-mins, then at --exit-interval. A condition true on any rank stops
// every rank (`any_rank` is the caller's all-reduce MAX over the world), so all take the same exit
// and save the same checkpoint first.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "megatron/core/exit_signal.h"
#include "megatron/train/run_plan.h"

namespace megatron::train {

struct EarlyExit {
  std::string reason;  // "signal", "exit-duration" or "exit-interval" (TrainingResult::early_exit)
  std::string what;    // Megatron's print_datetime label: "exiting program at iteration 20", ...
};

class ExitPolicy {
 public:
  using Clock = std::chrono::steady_clock;
  using AnyRank = std::function<bool(bool)>;

  // Installs the --exit-signal-handler handler now: a signal during a long start-up is then a
  // clean stop too. `start`: Megatron's _TRAIN_START_TIME, which the duration counts from.
  ExitPolicy(const ExitPlan& plan, Clock::time_point start);

  // The exit signal (checked first, before the regular save).
  std::optional<EarlyExit> signal(const AnyRank& any_rank) const;
  // The duration, then the exit interval (checked after the regular save), at `iteration`.
  std::optional<EarlyExit> limits(std::int64_t iteration, const AnyRank& any_rank) const;

 private:
  ExitPlan plan_;
  Clock::time_point start_;
  std::unique_ptr<ExitSignal> signal_;
};

}  // namespace megatron::train
