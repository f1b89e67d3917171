// The trainer end to end on the Megatron-made golden dataset: the loss falls, a run resumed from
// its checkpoint reproduces the straight run's losses bit for bit, Megatron's lines are printed,
// and a checkpoint of another model shape is refused with the list of differences.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "megatron/core/check.h"
#include "megatron/train/trainer.h"
#include "test_support.h"

namespace megatron::train {
namespace {

using testing::TempDir;

std::vector<std::string> tiny_run(const TempDir& dir, std::vector<std::string> extra) {
  std::vector<std::string> args = {
      "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "32",
      "--max-position-embeddings", "32", "--micro-batch-size", "2", "--global-batch-size", "4",
      "--train-iters", "6", "--lr", "3e-3", "--min-lr", "1e-4", "--lr-decay-style", "cosine",
      "--lr-warmup-iters", "1", "--data-path", testing::golden_dataset_prefix(),
      "--data-cache-path", (dir / "cache"), "--tokenizer-type", "GPT2BPETokenizer", "--vocab-file",
      testing::gpt2_vocab_file(), "--merge-file", testing::gpt2_merges_file(), "--log-interval", "2",
      "--eval-interval", "3", "--eval-iters", "1", "--make-vocab-size-divisible-by", "64"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TrainingResult train(const std::vector<std::string>& args, std::string* output = nullptr) {
  std::vector<std::string> messages;
  ParseOptions options;
  options.messages = &messages;
  std::ostringstream out;
  const TrainingResult r = run_training(parse_arguments(args, options), messages, out);
  if (output) *output = out.str();
  return r;
}

TEST(Trainer, ResumeReproducesTheStraightRunBitForBit) {
  TempDir dir("trainer_resume");
  const TrainingResult straight = train(tiny_run(dir, {}));
  ASSERT_EQ(straight.iteration_losses.size(), 6u);
  const std::string ckpt = dir / "ckpt";
  const TrainingResult first = train(tiny_run(dir, {"--save", ckpt, "--save-interval", "3", "--exit-interval", "3"}));
  ASSERT_EQ(first.iteration_losses.size(), 3u);
  const TrainingResult second = train(tiny_run(dir, {"--load", ckpt, "--save", ckpt, "--save-interval", "3"}));
  ASSERT_EQ(second.iteration_losses.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(first.iteration_losses[i], straight.iteration_losses[i]) << "iteration " << i + 1;
    EXPECT_EQ(second.iteration_losses[i], straight.iteration_losses[i + 3]) << "iteration " << i + 4;
  }
  EXPECT_EQ(second.final_iteration, 6);
  EXPECT_EQ(second.final_validation_loss, straight.final_validation_loss);
}

TEST(Trainer, LossFallsAndMegatronLinesArePrinted) {
  TempDir dir("trainer_lines");
  std::string out;
  const TrainingResult r = train(tiny_run(dir, {"--train-iters", "12", "--log-throughput", "--lr", "1e-2"}), &out);
  ASSERT_EQ(r.iteration_losses.size(), 12u);
  EXPECT_LT(r.iteration_losses.back(), r.iteration_losses.front() - 0.5);
  EXPECT_NE(out.find("------------------------ arguments ------------------------\n"), std::string::npos);
  EXPECT_NE(out.find("  num_layers ...................................... 2\n"), std::string::npos);
  EXPECT_NE(out.find(" > padded vocab (size: 50257) with 47 dummy tokens (new size: 50304)"), std::string::npos);
  const std::regex line(R"( \[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}\] iteration +(\d+)/ +12 \| consumed samples: +\d+ \| )"
                        R"(elapsed time per iteration \(ms\): [0-9.]+ \| throughput per GPU \(TFLOP/s/GPU\): [0-9.]+ \| )"
                        R"(tokens per second per GPU: [0-9.]+ \| learning rate: \d\.\d{6}E[-+]\d\d \| )"
                        R"(global batch size: +4 \| lm loss: \d\.\d{6}E[-+]\d\d \| loss scale: 1\.0 \| )"
                        R"(grad norm: [0-9.]+ \| number of skipped iterations: +0 \| number of nan iterations: +0 \|)");
  std::vector<std::string> iterations;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (std::regex_match(l, m, line)) iterations.push_back(m[1]);
  }
  EXPECT_EQ(iterations, (std::vector<std::string>{"1", "2", "4", "6", "8", "10", "12"}));
  EXPECT_NE(out.find(" validation loss at iteration 3 | lm loss value: "), std::string::npos);
  EXPECT_NE(out.find(" validation loss at iteration 12 on test set | "), std::string::npos);
}

TEST(Trainer, RefusesACheckpointOfAnotherShape) {
  TempDir dir("trainer_shape");
  const std::string ckpt = dir / "ckpt";
  train(tiny_run(dir, {"--save", ckpt, "--save-interval", "3", "--exit-interval", "3"}));
  try {
    train(tiny_run(dir, {"--load", ckpt, "--hidden-size", "48", "--ffn-hidden-size", "128"}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("saved for a different model"), std::string::npos) << msg;
    EXPECT_NE(msg.find("hidden_size: checkpoint 32, command line 48"), std::string::npos) << msg;
    EXPECT_NE(msg.find("kv_channels: checkpoint 8, command line 12"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("ffn_hidden_size"), std::string::npos) << msg;  // 128 in both
  }
}

}  // namespace
}  // namespace megatron::train
