// The gradient scalers (see loss_scaler.h), written from Megatron's DynamicGradScaler rules.
#include "megatron/optim/loss_scaler.h"

#include <algorithm>

#include "megatron/core/check.h"

namespace megatron::optim {

LossScaler::LossScaler(const LossScalerConfig& config)
    : config_(config), scale_(config.scale), hysteresis_tracker_(config.hysteresis) {
  MEGATRON_CHECK(config.scale > 0.0 && config.min_scale > 0.0, "loss scales must be positive (got ", config.scale,
                 " and minimum ", config.min_scale, ")");
  MEGATRON_CHECK(!config.dynamic || (config.growth_interval > 0 && config.hysteresis > 0),
                 "--loss-scale-window and --hysteresis must be positive");
}

void LossScaler::update(bool found_inf) {
  if (!config_.dynamic) return;
  if (found_inf) {
    growth_tracker_ = 0;
    --hysteresis_tracker_;
    if (hysteresis_tracker_ <= 0) scale_ = std::max(scale_ * 0.5, config_.min_scale);
    return;
  }
  ++growth_tracker_;
  if (static_cast<double>(growth_tracker_) == config_.growth_interval) {
    growth_tracker_ = 0;
    hysteresis_tracker_ = config_.hysteresis;
    scale_ *= 2.0;
  }
}

nlohmann::json LossScaler::state() const {
  return {{"scale", scale_}, {"growth_tracker", growth_tracker_}, {"hysteresis_tracker", hysteresis_tracker_}};
}

void LossScaler::load_state(const nlohmann::json& state) {
  try {
    scale_ = state.at("scale").get<double>();
    growth_tracker_ = state.at("growth_tracker").get<std::int64_t>();
    hysteresis_tracker_ = state.at("hysteresis_tracker").get<int>();
  } catch (const nlohmann::json::exception& e) {
    MEGATRON_FAIL("the checkpoint's loss-scaler state is incomplete (", e.what(), ")");
  }
  // A constant scaler keeps the scale it was given (Megatron's ConstantGradScaler ignores the state).
  if (!config_.dynamic) scale_ = config_.scale;
}

}  // namespace megatron::optim
