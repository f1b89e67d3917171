// The LR / WD schedules against values of Megatron's formulas (computed separately in Python
// from spec 6.3), the AdamW step against a double-precision transcription of the update.
#include <gtest/gtest.h>

#include <cmath>

#include "megatron/core/check.h"
#include "megatron/kernels/aten/adamw_ops.h"
#include "megatron/optim/adamw.h"
#include "megatron/optim/param_scheduler.h"

namespace megatron::optim {
namespace {

SchedulerConfig schedule(LrDecayStyle style) {
  SchedulerConfig c;
  c.max_lr = 1e-3;
  c.min_lr = 1e-4;
  c.warmup_steps = 100;
  c.decay_steps = 1000;
  c.decay_style = style;
  c.wsd_decay_steps = 200;
  return c;
}

std::vector<double> lrs_at(const SchedulerConfig& config, const std::vector<std::int64_t>& steps) {
  ParamScheduler s(config);
  std::vector<double> out;
  for (const auto n : steps) {
    s.set_num_steps(n);
    out.push_back(s.lr());
  }
  return out;
}

void expect_all_near(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-15) << "index " << i;
}

const std::vector<std::int64_t> kSteps = {0, 50, 100, 101, 550, 999, 1000, 1001, 5000};

TEST(ParamScheduler, LinearWarmupThenLinearDecay) {
  expect_all_near(lrs_at(schedule(LrDecayStyle::kLinear), kSteps),
                  {0.0, 0.0005, 0.001, 0.000999, 0.00055, 0.00010099999999999996, 0.0001, 0.0001, 0.0001});
}

TEST(ParamScheduler, CosineDecay) {
  expect_all_near(lrs_at(schedule(LrDecayStyle::kCosine), kSteps),
                  {0.0, 0.0005, 0.001, 0.0009999972584460056, 0.00055, 0.00010000274155399433, 0.0001, 0.0001,
                   0.0001});
}

TEST(ParamScheduler, InverseSquareRootDecay) {
  expect_all_near(lrs_at(schedule(LrDecayStyle::kInverseSquareRoot), kSteps),
                  {0.0, 0.0005, 0.001, 0.000995037190209989, 0.00042640143271122083, 0.00031638599858416634,
                   0.00031622776601683794, 0.0001, 0.0001});
}

TEST(ParamScheduler, ConstantIgnoresDecay) {
  expect_all_near(lrs_at(schedule(LrDecayStyle::kConstant), {0, 50, 101, 5000}), {0.0, 0.0005, 0.001, 0.001});
}

TEST(ParamScheduler, WsdAnnealsInTheLastSteps) {
  const std::vector<std::int64_t> steps = {700, 800, 801, 900, 1000};
  auto wsd = [&](WsdDecayStyle style) {
    auto c = schedule(LrDecayStyle::kWsd);
    c.wsd_decay_style = style;
    return lrs_at(c, steps);
  };
  expect_all_near(wsd(WsdDecayStyle::kLinear), {0.001, 0.001, 0.0009954999999999999, 0.00055, 0.0001});
  expect_all_near(wsd(WsdDecayStyle::kCosine), {0.001, 0.001, 0.0009999444846167471, 0.00055, 0.0001});
  expect_all_near(wsd(WsdDecayStyle::kExponential),
                  {0.001, 0.001, 0.000993772473090162, 0.0004727922061357856, 0.0001});
  expect_all_near(wsd(WsdDecayStyle::kMinusSqrt), {0.001, 0.001, 0.0009363603896932108, 0.0003636038969321072, 0.0001});
}

TEST(ParamScheduler, WarmupStartsAtInitLr) {
  auto c = schedule(LrDecayStyle::kLinear);
  c.init_lr = 2e-4;
  expect_all_near(lrs_at(c, {0, 50, 100}), {2e-4, 6e-4, 1e-3});
}

TEST(ParamScheduler, WeightDecayIncrements) {
  SchedulerConfig c = schedule(LrDecayStyle::kLinear);
  c.start_wd = 0.0;
  c.end_wd = 0.1;
  c.wd_incr_steps = 1000;
  c.wd_incr_style = WdIncrStyle::kLinear;
  ParamScheduler linear(c);
  std::vector<double> got;
  for (const std::int64_t n : {0, 250, 1000, 2000}) {
    linear.set_num_steps(n);
    got.push_back(linear.wd());
  }
  expect_all_near(got, {0.0, 0.025, 0.1, 0.1});
  c.wd_incr_style = WdIncrStyle::kCosine;
  ParamScheduler cosine(c);
  got.clear();
  for (const std::int64_t n : {0, 250, 500, 1000}) {
    cosine.set_num_steps(n);
    got.push_back(cosine.wd());
  }
  expect_all_near(got, {0.0, 0.014644660940672627, 0.05, 0.1});
}

TEST(ParamScheduler, StepCountsSamples) {
  ParamScheduler s(schedule(LrDecayStyle::kLinear));
  EXPECT_EQ(s.num_steps(), 0);
  s.step(16);
  s.step(16);
  EXPECT_EQ(s.num_steps(), 32);
  EXPECT_NEAR(s.lr(), 1e-3 * 32 / 100, 1e-18);
}

TEST(ParamScheduler, RejectsBadSettings) {
  auto c = schedule(LrDecayStyle::kLinear);
  c.min_lr = 1e-2;
  EXPECT_THROW(ParamScheduler{c}, Error);
  auto d = schedule(LrDecayStyle::kLinear);
  d.warmup_steps = 1000;  // not shorter than the decay
  EXPECT_THROW(ParamScheduler{d}, Error);
}

// The AdamW step the optimizer runs (the kernels' entry; on CPU tensors its ATen path) against
// torch.optim.AdamW's update written out in double precision.
TEST(AdamWStep, MatchesTheUpdateFormulaInDoublePrecision) {
  at::Tensor w = at::tensor({0.5, -1.25, 2.0, 0.125}, at::kFloat);
  at::Tensor b = at::tensor({0.3, -0.7}, at::kFloat);
  at::Tensor mw = at::zeros({4}), vw = at::zeros({4}), mb2 = at::zeros({2}), vb2 = at::zeros({2});
  std::vector<double> pw = {0.5, -1.25, 2.0, 0.125}, pb = {0.3, -0.7};
  std::vector<double> mw_d(4, 0), vw_d(4, 0), mb(2, 0), vb(2, 0);
  const double lr = 0.01, wd = 0.1;
  for (int t = 1; t <= 3; ++t) {
    const std::vector<double> gw = {0.1 * t, -0.2, 0.05 * t * t, 1.0}, gb = {-0.3, 0.02 * t};
    kernels::aten::AdamWLists lists;
    lists.params = {w, b};
    lists.grads = {at::tensor(std::vector<float>(gw.begin(), gw.end())), at::tensor(std::vector<float>(gb.begin(), gb.end()))};
    lists.exp_avgs = {mw, mb2};
    lists.exp_avg_sqs = {vw, vb2};
    lists.decays = {true, false};  // biases get no weight decay
    kernels::AdamWHyperparams hyper;
    hyper.lr = lr;
    hyper.beta1 = 0.9;
    hyper.beta2 = 0.95;
    hyper.eps = 1e-8;
    hyper.weight_decay = wd;
    hyper.step = t;
    kernels::aten::adamw_step_(lists, hyper);
    auto update = [&](std::vector<double>& p, std::vector<double>& m, std::vector<double>& v,
                      const std::vector<double>& g, bool decay) {
      for (std::size_t i = 0; i < p.size(); ++i) {
        if (decay) p[i] *= 1 - lr * wd;
        m[i] = 0.9 * m[i] + 0.1 * g[i];
        v[i] = 0.95 * v[i] + 0.05 * g[i] * g[i];
        const double mhat = m[i] / (1 - std::pow(0.9, t)), vhat = v[i] / (1 - std::pow(0.95, t));
        p[i] -= lr * mhat / (std::sqrt(vhat) + 1e-8);
      }
    };
    update(pw, mw_d, vw_d, gw, true);
    update(pb, mb, vb, gb, false);
  }
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(w[i].item<double>(), pw[i], 1e-6) << i;
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(b[i].item<double>(), pb[i], 1e-6) << i;
}

TEST(AdamW, DecaysOnlyMatricesThatAreNotBiases) {
  EXPECT_TRUE(decays_weight("decoder.layers.0.mlp.linear_fc1.weight", at::zeros({2, 2})));
  EXPECT_FALSE(decays_weight("decoder.layers.0.mlp.linear_fc1.bias", at::zeros({2})));
  EXPECT_FALSE(decays_weight("decoder.final_layernorm.weight", at::zeros({2})));
}

}  // namespace
}  // namespace megatron::optim
