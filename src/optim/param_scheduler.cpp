// Megatron's learning-rate and weight-decay formulas (see param_scheduler.h), step for step.
#include "megatron/optim/param_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "megatron/core/check.h"

namespace megatron::optim {

ParamScheduler::ParamScheduler(const SchedulerConfig& config) : config_(config) {
  MEGATRON_CHECK(config.min_lr >= 0.0 && config.max_lr >= config.min_lr,
                 "--lr (", config.max_lr, ") must be at least --min-lr (", config.min_lr, ") >= 0");
  MEGATRON_CHECK(config.decay_steps > 0 || config.decay_style == LrDecayStyle::kConstant,
                 "the learning-rate decay length must be positive");
  MEGATRON_CHECK(config.warmup_steps < static_cast<double>(config.decay_steps) || config.decay_style == LrDecayStyle::kConstant,
                 "the warmup (", config.warmup_steps, " samples) must be shorter than the decay (",
                 config.decay_steps, " samples)");
  MEGATRON_CHECK(config.wd_incr_style != WdIncrStyle::kConstant || config.start_wd == config.end_wd,
                 "a constant weight decay needs --start-weight-decay == --end-weight-decay");
}

double ParamScheduler::lr() const {
  const auto& c = config_;
  const double n = static_cast<double>(num_steps_);
  if (c.warmup_steps > 0 && n <= c.warmup_steps) {
    return c.init_lr + (c.max_lr - c.init_lr) * n / c.warmup_steps;
  }
  if (c.decay_style == LrDecayStyle::kConstant) return c.max_lr;
  if (num_steps_ > c.decay_steps) return c.min_lr;
  if (c.decay_style == LrDecayStyle::kInverseSquareRoot) {
    const double warmup = std::max(c.warmup_steps, 1.0);
    const double steps = static_cast<double>(std::max<std::int64_t>(num_steps_, 1));
    return std::max(c.min_lr, c.max_lr * std::sqrt(warmup) / std::sqrt(steps));
  }
  const double ratio = (n - c.warmup_steps) / (static_cast<double>(c.decay_steps) - c.warmup_steps);
  double coeff = 0.0;
  switch (c.decay_style) {
    case LrDecayStyle::kLinear: coeff = 1.0 - ratio; break;
    case LrDecayStyle::kCosine: coeff = 0.5 * (std::cos(std::numbers::pi * ratio) + 1.0); break;
    case LrDecayStyle::kWsd: {
      const std::int64_t anneal_start = c.decay_steps - c.wsd_decay_steps;
      if (num_steps_ <= anneal_start) {
        coeff = 1.0;
        break;
      }
      const double r = static_cast<double>(num_steps_ - anneal_start) / static_cast<double>(c.wsd_decay_steps);
      switch (c.wsd_decay_style) {
        case WsdDecayStyle::kLinear: coeff = 1.0 - r; break;
        case WsdDecayStyle::kCosine: coeff = 0.5 * (std::cos(std::numbers::pi * r) + 1.0); break;
        case WsdDecayStyle::kExponential: coeff = 2.0 * std::pow(0.5, r) - 1.0; break;
        case WsdDecayStyle::kMinusSqrt: coeff = 1.0 - std::sqrt(r); break;
      }
      break;
    }
    default: break;
  }
  return c.min_lr + coeff * (c.max_lr - c.min_lr);
}

double ParamScheduler::wd() const {
  const auto& c = config_;
  if (num_steps_ > c.wd_incr_steps) return c.end_wd;
  if (c.wd_incr_style == WdIncrStyle::kConstant) return c.end_wd;
  const double ratio = static_cast<double>(num_steps_) / static_cast<double>(c.wd_incr_steps);
  const double coeff = c.wd_incr_style == WdIncrStyle::kLinear
                           ? ratio
                           : 0.5 * (std::cos(std::numbers::pi * (1.0 - ratio)) + 1.0);
  return c.start_wd + coeff * (c.end_wd - c.start_wd);
}

}  // namespace megatron::optim
