// Megatron's gradient scalers (megatron/core/optimizer/grad_scaler.py): the loss is multiplied by
// the scale before the backward pass, so that fp16 gradients stay above fp16's smallest normals;
// the optimizer divides them by it again and asks the scaler whether the step may be taken.
// - Constant (--loss-scale S): the scale never changes; an overflow still skips the step.
// - Dynamic (--fp16 without --loss-scale): starts at --initial-loss-scale (2^32); an overflow skips
//   the step and counts down a hysteresis of --hysteresis overflows (not reset by good steps),
//   after which every further overflow halves the scale (never below --min-loss-scale); after
//   --loss-scale-window consecutive good steps the scale doubles and the hysteresis refills.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>

namespace megatron::optim {

struct LossScalerConfig {
  bool dynamic = true;
  double scale = 4294967296.0;      // constant: the scale; dynamic: the initial scale
  double min_scale = 1.0;
  double growth_interval = 1000.0;  // --loss-scale-window (a float in Megatron, compared as such)
  int hysteresis = 2;
};

class LossScaler {
 public:
  explicit LossScaler(const LossScalerConfig& config);

  double scale() const { return scale_; }
  // After each step's overflow check (found_inf: a gradient was inf or NaN on some rank).
  void update(bool found_inf);

  // {"scale", "growth_tracker", "hysteresis_tracker"}, as Megatron's state_dict.
  nlohmann::json state() const;
  // Throws megatron::Error naming the missing or malformed entry.
  void load_state(const nlohmann::json& state);

 private:
  LossScalerConfig config_;
  double scale_;
  std::int64_t growth_tracker_ = 0;
  int hysteresis_tracker_;
};

}  // namespace megatron::optim
