// Megatron's OptimizerParamScheduler (spec 6.3): learning rate and weight decay as functions of
// the number of samples consumed (steps are counted in samples: one iteration = global batch).
// Warmup from --lr-warmup-init, then constant / linear / cosine / inverse-square-root / WSD
// decay to --min-lr; weight decay constant, or increasing linearly / by cosine.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "megatron/core/enum_names.h"

namespace megatron::optim {

enum class LrDecayStyle { kConstant, kLinear, kCosine, kInverseSquareRoot, kWsd };
enum class WsdDecayStyle { kExponential, kLinear, kCosine, kMinusSqrt };
enum class WdIncrStyle { kConstant, kLinear, kCosine };

// Megatron's spellings (--lr-decay-style, --lr-wsd-decay-style, --weight-decay-incr-style).
inline constexpr std::array<EnumName<LrDecayStyle>, 5> kLrDecayStyleNames{{
    {LrDecayStyle::kConstant, "constant"}, {LrDecayStyle::kLinear, "linear"}, {LrDecayStyle::kCosine, "cosine"},
    {LrDecayStyle::kInverseSquareRoot, "inverse-square-root"}, {LrDecayStyle::kWsd, "WSD"}}};
inline constexpr std::array<EnumName<WsdDecayStyle>, 4> kWsdDecayStyleNames{{
    {WsdDecayStyle::kExponential, "exponential"}, {WsdDecayStyle::kLinear, "linear"},
    {WsdDecayStyle::kCosine, "cosine"}, {WsdDecayStyle::kMinusSqrt, "minus_sqrt"}}};
inline constexpr std::array<EnumName<WdIncrStyle>, 3> kWdIncrStyleNames{{
    {WdIncrStyle::kConstant, "constant"}, {WdIncrStyle::kLinear, "linear"}, {WdIncrStyle::kCosine, "cosine"}}};
inline std::span<const EnumName<LrDecayStyle>> enum_names(LrDecayStyle) { return kLrDecayStyleNames; }
inline std::span<const EnumName<WsdDecayStyle>> enum_names(WsdDecayStyle) { return kWsdDecayStyleNames; }
inline std::span<const EnumName<WdIncrStyle>> enum_names(WdIncrStyle) { return kWdIncrStyleNames; }

struct SchedulerConfig {
  double max_lr = 0.0;
  double min_lr = 0.0;
  double init_lr = 0.0;             // --lr-warmup-init
  double warmup_steps = 0.0;        // samples; fractional with --lr-warmup-fraction, as in Megatron
  std::int64_t decay_steps = 0;     // samples
  LrDecayStyle decay_style = LrDecayStyle::kLinear;
  std::int64_t wsd_decay_steps = 0;  // samples
  WsdDecayStyle wsd_decay_style = WsdDecayStyle::kExponential;
  double start_wd = 0.01;
  double end_wd = 0.01;
  std::int64_t wd_incr_steps = 0;   // samples
  WdIncrStyle wd_incr_style = WdIncrStyle::kConstant;
};

// How a resume treats the schedule a checkpoint recorded (Megatron's load_state_dict).
enum class SavedSchedule {
  kMustMatch,      // every setting must equal this run's (Megatron's default assertion)
  kUseCheckpoint,  // --use-checkpoint-opt-param-scheduler: the checkpoint's settings win
  kOverride,       // --override-opt-param-scheduler: this run's settings win
};

class ParamScheduler {
 public:
  // Megatron calls step(0) at construction: num_steps starts at 0.
  explicit ParamScheduler(const SchedulerConfig& config);

  void step(std::int64_t increment) { num_steps_ += increment; }
  double lr() const;  // at the current step count
  double wd() const;
  std::int64_t num_steps() const { return num_steps_; }
  void set_num_steps(std::int64_t n) { num_steps_ = n; }  // on resume
  const SchedulerConfig& config() const { return config_; }

  // Megatron's state_dict (max_lr, min_lr, lr_warmup_steps, lr_decay_steps, lr_decay_style,
  // num_steps, start_wd, end_wd, wd_incr_steps, wd_incr_style; styles by name) plus the settings
  // Megatron's omits that shape the curve too (lr_warmup_init, wsd_decay_steps, lr_wsd_decay_style).
  nlohmann::json state() const;
  // Restores the step count and, by `policy`, the settings from a state() of `source` (a
  // checkpoint folder, for messages). Returns the lines Megatron logs (" > using checkpoint value
  // 0.0006 for learning rate", " > overriding ..."). Under kMustMatch throws megatron::Error
  // naming every setting that differs, with both values and the flags that decide.
  std::vector<std::string> load_state(const nlohmann::json& saved, SavedSchedule policy, std::string_view source);

 private:
  SchedulerConfig config_;
  std::int64_t num_steps_ = 0;
};

}  // namespace megatron::optim
