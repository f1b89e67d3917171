// Resuming the learning-rate schedule as Megatron's OptimizerParamScheduler.load_state_dict does:
// the step count always from the checkpoint; the settings checked against this run's (default),
// taken from the checkpoint (--use-checkpoint-opt-param-scheduler) or from this run
// (--override-opt-param-scheduler), with Megatron's log lines. Expected learning rates are the
// spec's linear-decay formula evaluated by hand.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "megatron/core/check.h"
#include "megatron/optim/param_scheduler.h"
#include "test_support.h"

namespace megatron::optim {
namespace {

using megatron::testing::error_of;
using megatron::testing::expect_contains;

// Warmup 100 samples, linear decay from 1e-3 to 1e-4 over 1000.
SchedulerConfig saved_run() {
  SchedulerConfig c;
  c.max_lr = 1e-3;
  c.min_lr = 1e-4;
  c.warmup_steps = 100;
  c.decay_steps = 1000;
  c.decay_style = LrDecayStyle::kLinear;
  return c;
}

nlohmann::json saved_state_at(std::int64_t steps) {
  ParamScheduler s(saved_run());
  s.step(steps);
  return s.state();
}

TEST(ParamSchedulerState, RecordsMegatronsStateDictKeys) {
  const nlohmann::json j = saved_state_at(550);
  for (const char* key : {"max_lr", "lr_warmup_steps", "num_steps", "lr_decay_style", "lr_decay_steps", "min_lr",
                          "start_wd", "end_wd", "wd_incr_style", "wd_incr_steps"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j.at("num_steps"), 550);
  EXPECT_EQ(j.at("lr_decay_style"), "linear");
  EXPECT_EQ(j.at("wd_incr_style"), "constant");
  EXPECT_EQ(j.at("max_lr"), 1e-3);
}

TEST(ParamSchedulerState, TheSameScheduleResumesWhereItStopped) {
  ParamScheduler s(saved_run());
  const auto lines = s.load_state(saved_state_at(550), SavedSchedule::kMustMatch, "ckpt/iter_0000010");
  EXPECT_EQ(s.num_steps(), 550);
  // 1e-4 + 9e-4 * (1 - (550 - 100) / 900)
  EXPECT_NEAR(s.lr(), 5.5e-4, 1e-15);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.front(), " > using checkpoint value 0.001 for learning rate");
}

TEST(ParamSchedulerState, AChangedScheduleIsRefusedNamingEveryDifference) {
  SchedulerConfig changed = saved_run();
  changed.max_lr = 2e-3;
  changed.decay_style = LrDecayStyle::kCosine;
  ParamScheduler s(changed);
  const std::string message =
      error_of([&] { s.load_state(saved_state_at(550), SavedSchedule::kMustMatch, "ckpt/iter_0000010"); });
  expect_contains(message, {"ckpt/iter_0000010: this run's learning-rate schedule differs from the checkpoint's",
                            "learning rate (--lr): checkpoint 0.001, this run 0.002",
                            "learning rate decay style (--lr-decay-style): checkpoint linear, this run cosine",
                            "--use-checkpoint-opt-param-scheduler", "--override-opt-param-scheduler"});
  EXPECT_EQ(s.num_steps(), 0) << "a refused load changes nothing";
  EXPECT_EQ(s.config().max_lr, 2e-3);
}

TEST(ParamSchedulerState, UseCheckpointContinuesTheSavedSchedule) {
  SchedulerConfig changed = saved_run();
  changed.max_lr = 2e-3;
  changed.decay_steps = 5000;
  ParamScheduler s(changed);
  const auto lines = s.load_state(saved_state_at(550), SavedSchedule::kUseCheckpoint, "ckpt");
  EXPECT_NEAR(s.lr(), 5.5e-4, 1e-15);
  EXPECT_EQ(s.config().decay_steps, 1000);
  EXPECT_NE(std::find(lines.begin(), lines.end(), " > using checkpoint value 1000 for total number of iterations"),
            lines.end());
}

TEST(ParamSchedulerState, OverrideTakesThisRunsScheduleAtTheSavedStep) {
  SchedulerConfig changed = saved_run();
  changed.max_lr = 2e-3;
  ParamScheduler s(changed);
  const auto lines = s.load_state(saved_state_at(550), SavedSchedule::kOverride, "ckpt");
  EXPECT_EQ(s.num_steps(), 550);
  // 1e-4 + 1.9e-3 * (1 - 450 / 900)
  EXPECT_NEAR(s.lr(), 1.05e-3, 1e-15);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.front(), " > overriding learning rate value to 0.002");
}

TEST(ParamSchedulerState, AMalformedStateNamesTheCheckpoint) {
  ParamScheduler s(saved_run());
  expect_contains(error_of([&] { s.load_state(nlohmann::json::object(), SavedSchedule::kMustMatch, "ckpt/x"); }),
                  {"ckpt/x: the learning-rate scheduler state has no step count"});
  nlohmann::json bad = saved_state_at(10);
  bad["lr_decay_style"] = "sideways";
  expect_contains(error_of([&] { s.load_state(bad, SavedSchedule::kMustMatch, "ckpt/x"); }),
                  {"ckpt/x: the learning-rate scheduler's 'lr_decay_style' is \"sideways\""});
}

}  // namespace
}  // namespace megatron::optim
