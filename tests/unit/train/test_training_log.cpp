// Megatron's training and validation lines, character for character (spec 5.1, 5.2), and the
// FLOPs formula behind --log-throughput.
#include <gtest/gtest.h>

#include <chrono>
#include <regex>

#include "megatron/train/training_log.h"

namespace megatron::train {
namespace {

TEST(TrainingLog, IterationLineMatchesMegatronExample) {
  IterationLogFields f;
  f.timestamp = "2026-01-02 03:04:05.678901";
  f.iteration = 100;
  f.train_iters = 500000;
  f.consumed_samples = 1600;
  f.elapsed_ms_per_iteration = 1234.5;
  f.learning_rate = 3.0e-5;
  f.global_batch_size = 16;
  f.losses = {{"lm loss", 7.123456}};
  f.loss_scale = 1.0;
  f.grad_norm = 1.234;
  EXPECT_EQ(format_iteration_line(f),
            " [2026-01-02 03:04:05.678901] iteration      100/  500000 | consumed samples:         1600 | "
            "elapsed time per iteration (ms): 1234.5 | learning rate: 3.000000E-05 | global batch size:    16 | "
            "lm loss: 7.123456E+00 | loss scale: 1.0 | grad norm: 1.234 | number of skipped iterations:   0 | "
            "number of nan iterations:   0 |");
}

TEST(TrainingLog, OptionalFieldsAppearInMegatronOrder) {
  IterationLogFields f;
  f.timestamp = "2026-01-02 03:04:05.000000";
  f.iteration = 1;
  f.train_iters = 10;
  f.skipped_samples = 3;
  f.tflops_per_gpu = 12.345;
  f.tokens_per_second_per_gpu = 5000.0;
  f.losses = {{"lm loss", 2.0}, {"negative", -1.0}};
  const std::string line = format_iteration_line(f);
  EXPECT_NE(line.find("| skipped samples:            3 | elapsed time per iteration (ms): 0.0 | "
                      "throughput per GPU (TFLOP/s/GPU): 12.3 | tokens per second per GPU: 5000.0 | learning rate:"),
            std::string::npos)
      << line;
  EXPECT_EQ(line.find("negative"), std::string::npos);  // negative losses are omitted
  EXPECT_EQ(line.find("grad norm"), std::string::npos);  // no --clip-grad
}

TEST(TrainingLog, ValidationBlockIsFramedByDashes) {
  const std::string block = format_validation_block("iteration 1000", {{"lm loss", 5.4321}});
  const std::string middle = " validation loss at iteration 1000 | lm loss value: 5.432100E+00 | "
                             "lm loss PPL: 2.286289E+02 | ";
  const std::string dashes(middle.size() + 1, '-');
  EXPECT_EQ(block, dashes + "\n" + middle + "\n" + dashes);
  EXPECT_EQ(dashes.size(), 96u);  // as in the spec's example
}

TEST(TrainingLog, PerplexityIsCappedAtExp20) {
  const std::string block = format_validation_block("iteration 1", {{"lm loss", 25.0}});
  EXPECT_NE(block.find("lm loss PPL: 4.851652E+08"), std::string::npos) << block;
}

TEST(TrainingLog, TimestampHasMicroseconds) {
  EXPECT_TRUE(std::regex_match(timestamp_now(), std::regex(R"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6})")));
}

TEST(TrainingLog, FlopsFollowMegatronsFormula) {
  // GPT-3 175B: L 96, h 12288, ffn 4h, 96 heads, seq 2048, vocab 51200, one sequence.
  const FlopsShape s{96, 12288, 4 * 12288, 96, 96, 128, 51200, 2048, false};
  const double q = 12288, per_token = 96 * 12288.0 * 4 * 12288 * 2 + 96 * 12288.0 * (3 * q) + 96 * q * 12288 +
                                      12288.0 * 51200;
  EXPECT_DOUBLE_EQ(flops_per_batch(s, 1), 6 * (2048 * per_token + 2048.0 * 2048 * 96 * q));
  EXPECT_NEAR(flops_per_batch(s, 1536) / 1e18, 3.3406, 0.0001);  // about 6 x 175e9 x 3.1M tokens, plus attention
  // An MoE layer's MLP counts top-k experts and the shared expert: Mixtral-like, as dense layers
  // whose MLP is k x F + Fs wide.
  FlopsShape moe{32, 4096, 14336, 32, 8, 128, 32000, 4096, true, 32, 2, 14336, 1024};
  FlopsShape dense{32, 4096, 2 * 14336 + 1024, 32, 8, 128, 32000, 4096, true};
  EXPECT_DOUBLE_EQ(flops_per_batch(moe, 8), flops_per_batch(dense, 8));
  moe.moe_layers = 16;  // every other layer: half the layers at 14336
  dense.ffn_hidden_size = (2 * 14336 + 1024 + 14336) / 2;
  EXPECT_DOUBLE_EQ(flops_per_batch(moe, 8), flops_per_batch(dense, 8));
}

// Megatron's timers.log with --timing-log-option minmax: the label is the name and a space,
// padded with dots to 48 characters, indented by four.
TEST(TrainingLog, TimerBlockIsMegatronsMinMaxFormat) {
  EXPECT_EQ(format_timer_block({{"model-and-optimizer-setup", 1234.5678, 2345.0},
                                {"train/valid/test-data-iterators-setup", 0.5, 12.346}}),
            "(min, max) time across ranks (ms):\n"
            "    model-and-optimizer-setup ......................: (1234.57, 2345.00)\n"
            "    train/valid/test-data-iterators-setup ..........: (0.50, 12.35)");
  // A name of 48 characters or more is not padded.
  const std::string long_name(50, 'x');
  EXPECT_EQ(format_timer_block({{long_name, 1, 2}}), "(min, max) time across ranks (ms):\n    " + long_name + " : (1.00, 2.00)");
}

TEST(TrainingLog, ProcessStartIsInThePast) {
  const double a = seconds_since_process_start();
  EXPECT_GE(a, 0.0);
  EXPECT_LT(a, 3600.0) << "this test process started within the hour";
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(30);
  while (std::chrono::steady_clock::now() < until) {
  }
  EXPECT_GE(seconds_since_process_start(), a + 0.01) << "the clock ticks are 10 ms";
}

}  // namespace
}  // namespace megatron::train
