// The scheduler's checkpoint state and Megatron's rule for resuming it: the step count always
// comes from the checkpoint; each setting must equal this run's unless
// --use-checkpoint-opt-param-scheduler (the checkpoint's wins) or --override-opt-param-scheduler
// (this run's wins) says otherwise (Megatron's OptimizerParamScheduler._check_and_set).
#include <nlohmann/json.hpp>

#include "megatron/core/check.h"
#include "megatron/core/strings.h"
#include "megatron/optim/param_scheduler.h"

namespace megatron::optim {
namespace {

using nlohmann::json;

json to_json_value(double v) { return v; }
json to_json_value(std::int64_t v) { return v; }
template <typename E>
  requires std::is_enum_v<E>
json to_json_value(E v) {
  return std::string(enum_name(v));
}

// A value as Megatron's messages print it (Python's str()).
template <typename T>
std::string python_str(const T& v) {
  const json j = to_json_value(v);
  return j.is_string() ? j.get<std::string>() : j.is_number_float() ? python_float_repr(j.get<double>()) : j.dump();
}

bool from_json_value(const json& j, double& v) {
  if (!j.is_number()) return false;
  v = j.get<double>();
  return true;
}
bool from_json_value(const json& j, std::int64_t& v) {
  if (!j.is_number_integer()) return false;
  v = j.get<std::int64_t>();
  return true;
}
template <typename E>
  requires std::is_enum_v<E>
bool from_json_value(const json& j, E& v) {
  const auto value = j.is_string() ? parse_enum<E>(j.get<std::string>()) : std::nullopt;
  if (value) v = *value;
  return value.has_value();
}

// Every setting once: its state_dict key, Megatron's name for it in messages, and the flags that
// decide it here.
template <typename C, typename F>
void visit_settings(C& c, F&& f) {
  f("max_lr", "learning rate", "--lr", c.max_lr);
  f("min_lr", "minimum learning rate", "--min-lr", c.min_lr);
  f("lr_warmup_steps", "warmup iterations", "--lr-warmup-iters/--lr-warmup-samples/--lr-warmup-fraction", c.warmup_steps);
  f("lr_decay_steps", "total number of iterations", "--lr-decay-iters/--lr-decay-samples, else --train-iters/--train-samples", c.decay_steps);
  f("lr_decay_style", "learning rate decay style", "--lr-decay-style", c.decay_style);
  f("start_wd", "start weight decay", "--start-weight-decay, else --weight-decay", c.start_wd);
  f("end_wd", "end weight decay", "--end-weight-decay, else --weight-decay", c.end_wd);
  f("wd_incr_steps", "total number of weight decay iterations", "--train-iters/--train-samples", c.wd_incr_steps);
  f("wd_incr_style", "weight decay incr style", "--weight-decay-incr-style", c.wd_incr_style);
  f("lr_warmup_init", "warmup initial learning rate", "--lr-warmup-init", c.init_lr);
  f("wsd_decay_steps", "WSD decay steps", "--lr-wsd-decay-iters/--lr-wsd-decay-samples", c.wsd_decay_steps);
  f("lr_wsd_decay_style", "WSD decay style", "--lr-wsd-decay-style", c.wsd_decay_style);
}

}  // namespace

json ParamScheduler::state() const {
  json j = {{"num_steps", num_steps_}};
  visit_settings(config_, [&](const char* key, const char*, const char*, const auto& value) { j[key] = to_json_value(value); });
  return j;
}

std::vector<std::string> ParamScheduler::load_state(const json& saved, SavedSchedule policy, std::string_view source) {
  MEGATRON_CHECK(saved.is_object() && saved.contains("num_steps") && saved.at("num_steps").is_number_integer(),
                 source, ": the learning-rate scheduler state has no step count (", saved.dump(), ")");
  SchedulerConfig next = config_;
  std::vector<std::string> lines, differences;
  visit_settings(next, [&](const char* key, const char* name, const char* flags, auto& value) {
    if (!saved.contains(key)) return;  // older checkpoints record fewer settings
    auto recorded = value;
    MEGATRON_CHECK(from_json_value(saved.at(key), recorded), source, ": the learning-rate scheduler's '", key, "' is ",
                   saved.at(key).dump(), ", not a value of its type");
    if (policy == SavedSchedule::kOverride) {
      lines.push_back(str_cat(" > overriding ", name, " value to ", python_str(value)));
      return;
    }
    if (policy == SavedSchedule::kMustMatch && recorded != value) {
      differences.push_back(str_cat(name, " (", flags, "): checkpoint ", python_str(recorded), ", this run ",
                                    python_str(value)));
      return;
    }
    lines.push_back(str_cat(" > using checkpoint value ", python_str(recorded), " for ", name));
    value = recorded;
  });
  if (!differences.empty()) {
    std::string message = str_cat(source, ": this run's learning-rate schedule differs from the checkpoint's");
    for (const auto& d : differences) message += "\n  " + d;
    message += "\nkeep the flags the checkpoint was trained with, or give --use-checkpoint-opt-param-scheduler to "
               "continue the checkpoint's schedule, or --override-opt-param-scheduler to take this run's";
    throw_error(message);
  }
  config_ = next;
  num_steps_ = saved.at("num_steps").get<std::int64_t>();
  return lines;
}

}  // namespace megatron::optim
