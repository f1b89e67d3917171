// One training step and the evaluation of a tiny GPT in one process, against a plain reference:
// the model's forward called directly on the same samples (their token-weighted mean loss), and
// for the update a dense copy of the model with a per-tensor double-precision AdamW
// (optim/reference_adamw.h) on the gradient of Megatron's per-micro-batch mean losses.
#include "megatron/train/step_runner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <span>
#include <vector>

#include "megatron/core/check.h"
#include "megatron/parallel/single_process_context.h"
#include "model/tiny_model_config.h"
#include "optim/reference_adamw.h"
#include "tensor_expect.h"

namespace megatron::train {
namespace {

using megatron::testing::expect_close;
using megatron::testing::Tolerance;

constexpr int kMbs = 2;
constexpr std::int64_t kEod = 0;
const optim::AdamWConfig kAdam{0.9, 0.999, 1e-3};  // an eps that keeps the update smooth in tiny gradients

const parallel::ParallelContext& pc() { return parallel::single_process_context(); }

// Sample k: S + 1 ids spread over the vocabulary, with k % 4 EODs (whose loss is masked).
class SyntheticDataset : public data::SampleDataset {
 public:
  SyntheticDataset() {
    options_.eod = kEod;
    options_.eod_mask_loss = true;
  }
  std::uint64_t size() const override { return 16; }
  std::int32_t sequence_length() const override { return static_cast<std::int32_t>(testing::tiny_config().seq_length); }
  const data::SampleOptions& sample_options() const override { return options_; }
  void read_text(std::uint64_t k, std::span<std::int64_t> text) const override {
    for (std::size_t j = 0; j < text.size(); ++j) text[j] = 1 + static_cast<std::int64_t>((k * 31 + j * 17 + j * j * 7) % 95);
    const std::size_t eods[] = {3, 7, 12};
    for (std::uint64_t e = 0; e < k % 4; ++e) text[eods[e]] = kEod;
  }

 private:
  data::SampleOptions options_;
};

// The reference: samples [first, first + count) as Megatron's GPTDataset makes them (tokens, the
// next tokens as labels, loss masked on EOD tokens), through model.forward without gradients.
// Returns the sum of the masked token losses and the number of tokens counted.
std::pair<double, double> direct_loss(const model::GptModel& model, const SyntheticDataset& dataset,
                                      std::uint64_t first, std::uint64_t count) {
  const std::int64_t s = dataset.sequence_length();
  std::vector<std::int64_t> text(static_cast<std::size_t>(s + 1));
  std::vector<at::Tensor> tokens, labels;
  for (std::uint64_t k = first; k < first + count; ++k) {
    dataset.read_text(k, text);
    const at::Tensor t = at::tensor(text, at::kLong);
    tokens.push_back(t.slice(0, 0, s));
    labels.push_back(t.slice(0, 1, s + 1));
  }
  const at::Tensor x = at::stack(tokens), y = at::stack(labels);
  const at::Tensor mask = (x != kEod).to(at::kDouble);
  const at::Tensor positions = at::arange(s, at::kLong).expand({x.size(0), s});
  const at::NoGradGuard no_grad;
  const at::Tensor loss = model.forward(x, positions, at::Tensor(), y, model::ForwardContext{false, nullptr, nullptr});
  return {(loss.to(at::kDouble) * mask).sum().item<double>(), mask.sum().item<double>()};
}

// A model with its data-parallel buffers, pipeline executor, optimizer and step runner, built as
// the trainer builds them (fp32, pipeline 1 with one chunk).
struct Rig {
  Rig(std::uint64_t seed, int microbatches, double clip_grad = 1.0) {
    const model::ModelConfig config = testing::tiny_config();
    const parallel::ParameterInit init(seed);
    model = std::make_unique<model::GptModel>(config, pc(), init);
    ddp = std::make_unique<parallel::DataParallelBuffers>(model->named_parameters(), model->parameter_layouts(), pc(),
                                                          parallel::DataParallelConfig{});
    executor = std::make_unique<parallel::PipelineExecutor>(
        pc(), parallel::PipelineShape{1, 1, microbatches, 0},
        std::vector<std::int64_t>{config.seq_length, kMbs, config.hidden_size}, at::TensorOptions());
    optimizer = std::make_unique<optim::Optimizer>(*ddp, pc(), kAdam);
    runner = std::make_unique<StepRunner>(
        StepModel{{model.get()}, ddp.get(), executor.get(), optimizer.get(), &default_gen, &model_parallel_gen},
        StepSettings{microbatches, clip_grad, true, false}, pc());
  }
  std::vector<at::Tensor> snapshot() const {
    std::vector<at::Tensor> out;
    for (const auto& [name, t] : model->named_parameters()) out.push_back(t.detach().clone());
    return out;
  }
  std::unique_ptr<BatchReader> reader(std::uint64_t consumed) const {
    return std::make_unique<BatchReader>(dataset, consumed, BatchReaderOptions{kMbs, 0, 1, 0, at::kCPU});
  }

  SyntheticDataset dataset;
  at::Generator default_gen = at::make_generator<at::CPUGeneratorImpl>(11);
  at::Generator model_parallel_gen = at::make_generator<at::CPUGeneratorImpl>(12);
  std::unique_ptr<model::GptModel> model;
  std::unique_ptr<parallel::DataParallelBuffers> ddp;
  std::unique_ptr<parallel::PipelineExecutor> executor;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<StepRunner> runner;
};

TEST(StepRunner, TrainReportsTheTokenWeightedMeanLossOfItsMicroBatches) {
  Rig rig(5, 2);
  // Micro-batch 0: samples 0, 1 (0 + 1 EODs: 31 tokens); micro-batch 1: samples 2, 3 (2 + 3: 27).
  const auto [sum0, tokens0] = direct_loss(*rig.model, rig.dataset, 0, kMbs);
  const auto [sum1, tokens1] = direct_loss(*rig.model, rig.dataset, kMbs, kMbs);
  ASSERT_EQ(tokens0, 31.0);
  ASSERT_EQ(tokens1, 27.0);
  const double weighted = (sum0 + sum1) / (tokens0 + tokens1);
  const double mean_of_means = (sum0 / tokens0 + sum1 / tokens1) / 2;
  ASSERT_GT(std::abs(weighted - mean_of_means), 1e-4) << "the data must tell the two means apart";

  const auto reader = rig.reader(0);
  const StepReport report = rig.runner->train(reader.get(), 1, 1e-2, 0.1);
  EXPECT_NEAR(report.loss, weighted, 1e-5 * weighted);
  EXPECT_FALSE(report.skipped);
}

TEST(StepRunner, TrainMakesOneAdamWStepOnTheMeanOfTheMicroBatchLosses) {
  const double lr = 1e-2, wd = 0.1, clip = 1.0;
  Rig rig(5, 2, clip);
  const std::vector<at::Tensor> before = rig.snapshot();
  // The dense reference: Megatron's backward scalar is each micro-batch's mean token loss divided
  // by the number of micro-batches; then clipping to the global norm and AdamW.
  const model::ModelConfig config = testing::tiny_config();
  const parallel::ParameterInit init(5);
  const model::GptModel dense(config, pc(), init);
  testing::ReferenceAdamW reference(dense.named_parameters(), kAdam);
  std::vector<std::int64_t> text(static_cast<std::size_t>(config.seq_length + 1));
  for (std::uint64_t first : {0u, 2u}) {
    std::vector<at::Tensor> rows;
    for (std::uint64_t k = first; k < first + kMbs; ++k) {
      rig.dataset.read_text(k, text);
      rows.push_back(at::tensor(text, at::kLong));
    }
    const at::Tensor t = at::stack(rows);
    const at::Tensor x = t.slice(1, 0, config.seq_length), y = t.slice(1, 1);
    const at::Tensor mask = (x != kEod).to(at::kFloat);
    const at::Tensor positions = at::arange(config.seq_length, at::kLong).expand_as(x);
    const at::Tensor loss = dense.forward(x, positions, at::Tensor(), y, model::ForwardContext{false, nullptr, nullptr});
    ((loss * mask).sum() / mask.sum() / 2.0).backward();
  }
  const double norm = reference.clip_grad_norm(clip);
  reference.step(lr, wd);

  const auto reader = rig.reader(0);
  const StepReport report = rig.runner->train(reader.get(), 1, lr, wd);
  EXPECT_NEAR(report.grad_norm, norm, 1e-5 * norm);
  const auto& params = rig.model->named_parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i].second;
    EXPECT_FALSE(at::equal(p, before[i])) << params[i].first << " did not change";
    const at::Tensor& expected = dense.named_parameters()[i].second;
    expect_close(p, expected, Tolerance::elementwise(1e-5, 1e-5), params[i].first);
  }
}

TEST(StepRunner, ZeroLearningRateAndWeightDecayLeaveTheParametersEqual) {
  Rig rig(7, 2);
  const std::vector<at::Tensor> before = rig.snapshot();
  const auto [sum0, tokens0] = direct_loss(*rig.model, rig.dataset, 0, 2 * kMbs);
  const auto reader = rig.reader(0);
  const StepReport report = rig.runner->train(reader.get(), 1, 0.0, 0.0);
  EXPECT_NEAR(report.loss, sum0 / tokens0, 1e-5 * sum0 / tokens0);
  EXPECT_GT(report.grad_norm, 0.0);  // there were gradients; they moved nothing
  const auto& params = rig.model->named_parameters();
  for (std::size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(at::equal(params[i].second, before[i])) << params[i].first;
}

TEST(StepRunner, EvaluateReturnsTheDirectLossAndChangesNoParameter) {
  Rig rig(9, 2);
  const std::vector<at::Tensor> before = rig.snapshot();
  // Two evaluation steps of two micro-batches from sample 4 on: samples 4..11.
  const auto [sum, tokens] = direct_loss(*rig.model, rig.dataset, 4, 8);
  ASSERT_EQ(tokens, 8 * 16 - (0 + 1 + 2 + 3) * 2.0);
  const auto reader = rig.reader(4);
  const double loss = rig.runner->evaluate(reader.get(), 2, 1);
  EXPECT_NEAR(loss, sum / tokens, 1e-5 * sum / tokens);
  const auto& params = rig.model->named_parameters();
  for (std::size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(at::equal(params[i].second, before[i])) << params[i].first;
  // The evaluation read exactly its 8 samples: the next micro-batch is samples 12, 13.
  const auto next = reader->next();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->tokens[0][0].item<std::int64_t>(), 1 + (12 * 31) % 95);
}

TEST(StepRunner, ATrainingStepWithoutDataSaysWhereItRanOut) {
  Rig rig(3, 2);
  const auto reader = rig.reader(14);  // samples 14, 15: one micro-batch of the two a step takes
  try {
    rig.runner->train(reader.get(), 8, 1e-2, 0.0);
    ADD_FAILURE() << "expected the step to fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the training data ran out at iteration 8"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace megatron::train
