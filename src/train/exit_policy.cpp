// The early-exit checks (see exit_policy.h).
#include "megatron/train/exit_policy.h"

#include "megatron/core/strings.h"

namespace megatron::train {

ExitPolicy::ExitPolicy(const ExitPlan& plan, Clock::time_point start) : plan_(plan), start_(start) {
  if (plan.signal) signal_ = std::make_unique<ExitSignal>(*plan.signal);
}

std::optional<EarlyExit> ExitPolicy::signal(const AnyRank& any_rank) const {
  if (!signal_ || !any_rank(signal_->received())) return std::nullopt;
  return EarlyExit{"signal", "exiting program after receiving " + signal_name(signal_->signo()) + "."};
}

std::optional<EarlyExit> ExitPolicy::limits(std::int64_t iteration, const AnyRank& any_rank) const {
  if (const auto& limit = plan_.duration_in_mins) {
    const double minutes = std::chrono::duration<double>(Clock::now() - start_).count() / 60.0;
    if (any_rank(minutes > static_cast<double>(*limit))) {
      // Megatron formats the float with Python's str().
      return EarlyExit{"exit-duration", "exiting program after " + python_float_repr(minutes) + " minutes"};
    }
  }
  if (plan_.interval && iteration % *plan_.interval == 0) {
    return EarlyExit{"exit-interval", "exiting program at iteration " + std::to_string(iteration)};
  }
  return std::nullopt;
}

}  // namespace megatron::train
