// The loss scalers against Megatron's DynamicGradScaler rules worked out by hand for a given
// sequence of overflows, and the optimizer with a scaler: an injected inf skips the step (nothing
// moves, the step count stays) and halves the scale after the hysteresis; bf16 parameters train
// from fp32 main parameters through the main-grad hooks.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>
#include <memory>

#include "megatron/core/check.h"
#include "megatron/optim/loss_scaler.h"
#include "megatron/optim/optimizer.h"
#include "megatron/parallel/single_process_context.h"
#include "optim/reference_adamw.h"
#include "parallel/ddp_test_model.h"
#include "tensor_expect.h"

namespace megatron::optim {
namespace {

using megatron::testing::expect_close;
using megatron::testing::Tolerance;

using parallel::DataParallelBuffers;
using parallel::DataParallelConfig;
using testing::TinyModel;

TEST(LossScaler, HysteresisThenHalvingAndGrowthAfterTheWindow) {
  LossScaler s(LossScalerConfig{true, 1024.0, 1.0, 3.0, 2});
  // (overflow?, scale after the update) worked out from the rules: the hysteresis of 2 absorbs
  // the first overflow; from the second on every overflow halves (the hysteresis is not refilled
  // by good steps, only by a growth); 3 good steps in a row double and refill it.
  const std::vector<std::pair<bool, double>> steps = {
      {true, 1024}, {false, 1024}, {true, 512}, {true, 256}, {false, 256}, {false, 256},
      {false, 512},  // third good step in a row: growth, hysteresis back to 2
      {true, 512},   // absorbed again
      {true, 256},  {false, 256}, {false, 256}, {false, 512}, {false, 512}};
  for (std::size_t i = 0; i < steps.size(); ++i) {
    s.update(steps[i].first);
    EXPECT_EQ(s.scale(), steps[i].second) << "after step " << i + 1;
  }
}

TEST(LossScaler, NeverBelowTheMinimumAndStateRoundTrips) {
  LossScaler s(LossScalerConfig{true, 4.0, 2.0, 1000.0, 1});
  for (int i = 0; i < 5; ++i) s.update(true);
  EXPECT_EQ(s.scale(), 2.0);
  LossScaler t(LossScalerConfig{true, 4.0, 2.0, 1000.0, 1});
  t.load_state(s.state());
  EXPECT_EQ(t.state(), s.state());
  EXPECT_THROW(t.load_state(nlohmann::json{{"scale", 1.0}}), Error);
  LossScaler constant(LossScalerConfig{false, 128.0});
  constant.update(true);
  constant.update(true);
  EXPECT_EQ(constant.scale(), 128.0);
}

// A model, its buffer and an fp16-style optimizer with a dynamic scaler.
struct Scaled {
  explicit Scaled(at::ScalarType dtype = at::kFloat)
      : model(TinyModel::make(3)) {
    for (auto& [name, p] : model.params) p.set_data(p.detach().to(dtype));
    buffer = std::make_unique<DataParallelBuffers>(model.params, model.layouts, parallel::single_process_context(),
                                                   DataParallelConfig{});
    optimizer = std::make_unique<Optimizer>(*buffer, buffer->context(), AdamWConfig{},
                                            LossScalerConfig{true, 256.0, 1.0, 1000.0, 2});
  }
  StepResult step(int it, bool inject_inf) {
    buffer->zero_grad();
    const auto [x, t] = TinyModel::batch(static_cast<std::uint64_t>(it));
    const at::ScalarType dtype = model.params[0].second.scalar_type();
    (model.loss(x.to(dtype), t.to(dtype)).to(at::kFloat) * optimizer->loss_scale()).backward();
    buffer->finish_grad_sync();
    if (inject_inf) buffer->grad(1).view(-1)[0].fill_(std::numeric_limits<float>::infinity());
    return optimizer->step(0.01, 0.0, 1.0);
  }
  TinyModel model;
  std::unique_ptr<DataParallelBuffers> buffer;
  std::unique_ptr<Optimizer> optimizer;
};

TEST(OptimizerWithScaler, AnInfSkipsTheStepAndHalvesAfterTheHysteresis) {
  Scaled s;
  ASSERT_FALSE(s.step(0, false).skipped);
  const TinyModel before = s.model.clone();
  const std::int64_t steps = s.optimizer->step_count();
  const StepResult first = s.step(1, true);
  EXPECT_TRUE(first.skipped);
  EXPECT_EQ(s.optimizer->loss_scale(), 256.0);  // absorbed by the hysteresis
  EXPECT_TRUE(s.step(2, true).skipped);
  EXPECT_EQ(s.optimizer->loss_scale(), 128.0);
  EXPECT_EQ(s.optimizer->step_count(), steps);
  for (std::size_t i = 0; i < before.params.size(); ++i) {
    EXPECT_TRUE(at::equal(before.params[i].second, s.model.params[i].second)) << before.params[i].first;
  }
  EXPECT_FALSE(s.step(3, false).skipped);
  EXPECT_EQ(s.optimizer->step_count(), steps + 1);
}

TEST(OptimizerWithScaler, UnscaledUpdateMatchesTheUnscaledReference) {
  // The scale divides out: the step equals AdamW on the plain gradients (the reference in double).
  Scaled s;
  TinyModel dense = TinyModel::make(3);
  testing::ReferenceAdamW reference(dense.params, AdamWConfig{});
  for (int it = 0; it < 3; ++it) {
    const StepResult r = s.step(it, false);
    reference.zero_grad();
    const auto [x, t] = TinyModel::batch(static_cast<std::uint64_t>(it));
    dense.loss(x, t).backward();
    EXPECT_NEAR(r.grad_norm, reference.clip_grad_norm(1.0), 1e-5 * r.grad_norm) << "iteration " << it;
    reference.step(0.01, 0.0);
    for (std::size_t i = 0; i < dense.params.size(); ++i) {
      expect_close(s.model.params[i].second, dense.params[i].second, Tolerance::elementwise(1e-6, 1e-5), dense.params[i].first);
    }
  }
}

TEST(OptimizerWithScaler, Bf16ParametersTrainFromFp32MainParameters) {
  // bf16 parameters, fp32 gradients through the main-grad hooks, fp32 main parameters: after a
  // step the model's parameters are the bf16 rounding of the main ones, which follow the fp32
  // reference to bf16's precision of the gradients (2^-8 relative).
  Scaled s(at::kBFloat16);
  EXPECT_EQ(s.buffer->grad_data().scalar_type(), at::kFloat);
  TinyModel dense = TinyModel::make(3);
  for (auto& [name, p] : dense.params) p.set_data(p.detach().to(at::kBFloat16).to(at::kFloat));
  testing::ReferenceAdamW reference(dense.params, AdamWConfig{});
  for (int it = 0; it < 3; ++it) {
    s.step(it, false);
    reference.zero_grad();
    const auto [x, t] = TinyModel::batch(static_cast<std::uint64_t>(it));
    dense.loss(x, t).backward();
    reference.clip_grad_norm(1.0);
    reference.step(0.01, 0.0);
  }
  const at::Tensor main = s.optimizer->main_params();
  EXPECT_EQ(main.scalar_type(), at::kFloat);
  for (std::size_t i = 0; i < dense.params.size(); ++i) {
    const at::Tensor& p = s.model.params[i].second;
    EXPECT_EQ(p.scalar_type(), at::kBFloat16);
    expect_close(p.to(at::kFloat), dense.params[i].second, Tolerance::elementwise(2e-3, 2e-2), dense.params[i].first);
  }
}

}  // namespace
}  // namespace megatron::optim
