// The trainer end to end on the Megatron-made golden dataset: the loss falls, a run resumed from
// its checkpoint reproduces the straight run's losses bit for bit, Megatron's lines are printed,
// and a checkpoint of another model shape is refused with the list of differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
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

// An output stream that raises a signal once a given text has been printed: the signal arrives
// at a known point of the run (here: while the trainer prints an iteration line).
class SignalOnText : public std::stringbuf {
 public:
  SignalOnText(std::string text, int signo) : text_(std::move(text)), signo_(signo) {}
  bool raised() const { return raised_; }

 protected:
  int sync() override {
    if (!raised_ && str().find(text_) != std::string::npos) {
      raised_ = true;
      std::raise(signo_);
    }
    return 0;
  }

 private:
  std::string text_;
  int signo_;
  bool raised_ = false;
};

// Megatron's --exit-signal-handler: the signal during iteration 2 lets it finish, a checkpoint
// of iteration 2 is saved, the run stops early (no final evaluation), and the resumed run gives
// the uninterrupted run's losses bit for bit.
TEST(Trainer, ExitSignalSavesAndTheResumedRunMatchesTheStraightRun) {
  TempDir dir("trainer_exit_signal");
  const TrainingResult straight = train(tiny_run(dir, {}));
  const std::string ckpt = dir / "ckpt";
  std::vector<std::string> messages;
  ParseOptions options;
  options.messages = &messages;
  SignalOnText buffer("iteration        2/", SIGUSR1);
  std::ostream out(&buffer);
  const TrainingResult first = run_training(
      parse_arguments(tiny_run(dir, {"--save", ckpt, "--save-interval", "5", "--exit-signal-handler",
                                     "--exit-signal", "usr1"}),
                      options),
      messages, out);
  ASSERT_TRUE(buffer.raised());
  EXPECT_EQ(first.early_exit, "signal");
  EXPECT_EQ(first.final_iteration, 2);
  EXPECT_FALSE(first.final_validation_loss.has_value()) << "no final evaluation after the exit";
  const std::string printed = buffer.str();
  EXPECT_NE(printed.find("saving checkpoint at iteration       2"), std::string::npos) << printed;
  EXPECT_TRUE(std::regex_search(printed, std::regex(R"(\[exiting program after receiving SIGUSR1\.\] datetime: )"
                                                    R"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6} \n)")))
      << printed;
  const TrainingResult second = train(tiny_run(dir, {"--load", ckpt, "--save", ckpt, "--save-interval", "5"}));
  ASSERT_EQ(second.iteration_losses.size(), 4u);
  for (std::size_t i = 0; i < 2; ++i) EXPECT_EQ(first.iteration_losses[i], straight.iteration_losses[i]);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(second.iteration_losses[i], straight.iteration_losses[i + 2]) << "iteration " << i + 3;
  }
  EXPECT_EQ(second.final_validation_loss, straight.final_validation_loss);
}

TEST(Trainer, ExitSignalIsValidatedAtParseTime) {
  TempDir dir("trainer_exit_signal_bad");
  try {
    parse_arguments(tiny_run(dir, {"--exit-signal-handler", "--exit-signal", "SIGKILL"}), ParseOptions{});
    ADD_FAILURE() << "SIGKILL accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--exit-signal: 'SIGKILL' is not a signal this handler can catch"),
              std::string::npos)
        << e.what();
  }
}

// Mixed precision resumes exactly too: the fp32 main weights and Adam state come back from the
// optimizer pieces, the bf16/fp16 parameters from the model file, the fp16 loss scaler's scale and
// trackers from meta.json (a small window and an initial scale that overflows make it move).
TEST(Trainer, MixedPrecisionResumesBitForBit) {
  for (const std::vector<std::string>& precision :
       {std::vector<std::string>{"--bf16"}, {"--fp16", "--initial-loss-scale", "65536", "--loss-scale-window", "2"}}) {
    TempDir dir("trainer_resume_mixed");
    const TrainingResult straight = train(tiny_run(dir, precision));
    const std::string ckpt = dir / "ckpt";
    auto with = [&](std::vector<std::string> extra) {
      extra.insert(extra.end(), precision.begin(), precision.end());
      return tiny_run(dir, extra);
    };
    const TrainingResult first = train(with({"--save", ckpt, "--save-interval", "3", "--exit-interval", "3"}));
    const TrainingResult second = train(with({"--load", ckpt}));
    ASSERT_EQ(first.iteration_losses.size() + second.iteration_losses.size(), straight.iteration_losses.size());
    for (std::size_t i = 0; i < second.iteration_losses.size(); ++i) {
      EXPECT_EQ(second.iteration_losses[i], straight.iteration_losses[i + 3]) << precision[0] << " iteration " << i + 4;
    }
    EXPECT_EQ(first.skipped_iterations + second.skipped_iterations, straight.skipped_iterations) << precision[0];
    EXPECT_EQ(second.final_validation_loss, straight.final_validation_loss) << precision[0];
  }
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

  // Megatron's start-up report (spec 5.3, items 6 and 9), in Megatron's order.
  std::size_t at = 0;
  for (const std::string& expected :
       {std::string("time to initialize megatron (seconds): "), std::string("[after megatron is initialized] datetime: "),
        std::string("[after model, optimizer, and learning rate scheduler are built] datetime: "),
        std::string("[after dataloaders are built] datetime: "), std::string("done with setup ...\n"),
        std::string("(min, max) time across ranks (ms):\n    model-and-optimizer-setup ......................: ("),
        std::string("\n    train/valid/test-data-iterators-setup ..........: ("),
        std::string("Theoretical memory footprints: weight and optimizer="), std::string("training ...\n"),
        std::string("[before the start of training step] datetime: "),
        std::string("[after training is done] datetime: "), std::string(" validation loss at iteration 12 on validation set")}) {
    const std::size_t found = out.find(expected, at);
    ASSERT_NE(found, std::string::npos) << "missing, or out of Megatron's order: " << expected;
    at = found + expected.size();
  }
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(time to initialize megatron \(seconds\): \d+\.\d{3}\n)")));
  // The tiny model (2 layers, hidden 32, ffn 128, tied, vocabulary 50304) by Megatron's formula:
  // 2 x (2 x 32 x (128 + 2) + 2 x 32 x 32 x 2) + 2 x 32 = 24,896 in the layers and final norm,
  // 1,609,728 in the embedding, 1,634,624 in all, times 18 bytes = 28.06 MiB.
  EXPECT_NE(out.find("Number of parameters in most loaded shard in billions: 0.0016\n"
                     "Theoretical memory footprints: weight and optimizer=28.06 MB\n"),
            std::string::npos);
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

// Mixed precision on the CPU runs the same code as on a GPU. Over 30 iterations of the tiny model
// (dropout off, so that only the arithmetic differs), bf16 and fp16 follow the fp32 losses. The
// tolerance is one rounding of the loss value itself in the format (2^-9 relative for bf16's 8
// significant bits, 2^-12 for fp16's 11): the per-token rounding errors of the activations
// average out over the batch's tokens, and the fp32 main weights keep the updates from drifting
// (measured here: 1.6e-4 for bf16, 1.6e-5 for fp16, at the largest of the 30 iterations).
TEST(Trainer, MixedPrecisionTracksTheFp32Losses) {
  TempDir dir("trainer_mixed");
  const std::vector<std::string> common = {"--train-iters", "30", "--attention-dropout", "0", "--hidden-dropout", "0",
                                           "--eval-iters", "0", "--lr", "3e-3"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = common;
    args.insert(args.end(), extra.begin(), extra.end());
    return tiny_run(dir, args);
  };
  const TrainingResult fp32 = train(with({}));
  const TrainingResult bf16 = train(with({"--bf16"}));
  // A small initial scale: no overflow to skip, so every iteration is comparable.
  const TrainingResult fp16 = train(with({"--fp16", "--initial-loss-scale", "1024"}));
  ASSERT_EQ(fp32.iteration_losses.size(), 30u);
  ASSERT_EQ(bf16.iteration_losses.size(), 30u);
  ASSERT_EQ(fp16.iteration_losses.size(), 30u);
  EXPECT_EQ(fp16.skipped_iterations, 0);
  double worst_bf16 = 0, worst_fp16 = 0;
  for (std::size_t i = 0; i < 30; ++i) {
    const double ref = fp32.iteration_losses[i];
    worst_bf16 = std::max(worst_bf16, std::abs(bf16.iteration_losses[i] - ref) / ref);
    worst_fp16 = std::max(worst_fp16, std::abs(fp16.iteration_losses[i] - ref) / ref);
  }
  EXPECT_LT(worst_bf16, std::ldexp(1.0, -9));
  EXPECT_LT(worst_fp16, std::ldexp(1.0, -12));
  EXPECT_GT(worst_bf16, 0.0);  // bf16 really ran in bf16
  EXPECT_LT(bf16.iteration_losses.back(), bf16.iteration_losses.front() - 1.0);
  std::printf("largest relative loss difference to fp32 over 30 iterations: bf16 %.2e, fp16 %.2e\n", worst_bf16,
              worst_fp16);
}

// fp16 with Megatron's default dynamic scaler (2^32): the first iterations overflow and are skipped
// (the first absorbed by the hysteresis of 2, each later one halving the scale), printed in the
// iteration lines; once the scale fits, training proceeds and the scale grows after each window.
TEST(Trainer, Fp16SkipsOverflowsAndAdjustsTheLossScale) {
  TempDir dir("trainer_fp16");
  std::string out;
  const TrainingResult r = train(tiny_run(dir, {"--fp16", "--train-iters", "40", "--log-interval", "1",
                                                "--loss-scale-window", "5", "--eval-iters", "0"}), &out);
  const std::regex line(R"( iteration +(\d+)/ +40 \|.*\| loss scale: ([0-9.]+) \|.*number of skipped iterations: +(\d) \|)");
  std::vector<double> scales;
  std::vector<int> skipped;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (std::regex_search(l, m, line)) {
      scales.push_back(std::stod(m[2]));
      skipped.push_back(std::stoi(m[3]));
    }
  }
  ASSERT_EQ(scales.size(), 40u) << out;
  ASSERT_GT(r.skipped_iterations, 2);
  EXPECT_EQ(r.skipped_iterations, std::count(skipped.begin(), skipped.end(), 1));
  // The rules replayed on the printed skips: the scale every line must show.
  double scale = 4294967296.0;
  int hysteresis = 2, good = 0;
  for (std::size_t i = 0; i < scales.size(); ++i) {
    if (skipped[i]) {
      good = 0;
      if (--hysteresis <= 0) scale = std::max(1.0, scale / 2);
    } else if (++good == 5) {
      good = 0;
      hysteresis = 2;
      scale *= 2;
    }
    EXPECT_EQ(scales[i], scale) << "iteration " << i + 1;
  }
  EXPECT_EQ(skipped[0], 1);  // 2^32 overflows fp16 at once
  EXPECT_EQ(scales[0], 4294967296.0);
  EXPECT_EQ(skipped.back(), 0);
  EXPECT_LT(r.iteration_losses.back(), r.iteration_losses.front() - 0.5);
}

// Recomputation changes when activations are computed, not what: with dropout on (so the random
// streams must be replayed exactly) every policy gives the losses of no recomputation.
TEST(Trainer, RecomputationGivesTheSameLosses) {
  TempDir dir("trainer_recompute");
  const TrainingResult plain = train(tiny_run(dir, {"--train-iters", "8"}));
  for (const std::vector<std::string>& policy :
       {std::vector<std::string>{"--recompute-activations"},
        {"--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "2"},
        {"--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers", "1"}}) {
    std::vector<std::string> extra = {"--train-iters", "8"};
    extra.insert(extra.end(), policy.begin(), policy.end());
    const TrainingResult r = train(tiny_run(dir, extra));
    ASSERT_EQ(r.iteration_losses.size(), plain.iteration_losses.size());
    for (std::size_t i = 0; i < r.iteration_losses.size(); ++i) {
      EXPECT_NEAR(r.iteration_losses[i], plain.iteration_losses[i], 1e-6 * plain.iteration_losses[i])
          << policy[1] << " iteration " << i + 1;
    }
    EXPECT_EQ(r.final_validation_loss, plain.final_validation_loss) << policy[1];
  }
}

}  // namespace
}  // namespace megatron::train
