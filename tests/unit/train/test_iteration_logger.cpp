// What a run prints as it trains: the iteration line after the run's first iteration and at every
// --log-interval, its loss the mean over the interval's updated (not skipped) iterations, the
// skipped count, the grad norm when shown, Megatron's framed validation block, and the TensorBoard
// scalars written to the event file.
#include "megatron/train/iteration_logger.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <sstream>
#include <vector>

#include "test_support.h"

namespace megatron::train {
namespace {

using megatron::testing::expect_contains;

LoggerSettings settings(bool show_grad_norm = false) {
  LoggerSettings s;
  s.loop.train_iters = 10;
  s.loop.global_batch_size = 4;
  s.loop.log_interval = 3;
  s.show_grad_norm = show_grad_norm;
  return s;
}

Progress at(std::int64_t iteration) { return {iteration, 4 * iteration, 1e-4, 1.0}; }

std::vector<std::string> lines_of(const std::ostringstream& out) {
  std::vector<std::string> lines;
  std::istringstream in(out.str());
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(IterationLogger, PrintsAfterTheFirstIterationAndAtEveryLogInterval) {
  std::ostringstream out;
  IterationLogger logger(settings(), out, nullptr);
  logger.start(0);
  std::vector<std::size_t> lines_after;  // how many lines there are after each iteration
  for (std::int64_t it = 1; it <= 7; ++it) {
    logger.step(StepReport{1.0, false, 0.0, {}, {}}, at(it));
    lines_after.push_back(lines_of(out).size());
  }
  EXPECT_EQ(lines_after, (std::vector<std::size_t>{1, 1, 2, 2, 2, 3, 3}));
  const auto lines = lines_of(out);
  ASSERT_EQ(lines.size(), 3u);
  expect_contains(lines[0], {" iteration        1/      10 |", " consumed samples:            4 |"});
  expect_contains(lines[1], {" iteration        3/      10 |", " consumed samples:           12 |",
                             " learning rate: 1.000000E-04 |", " global batch size:     4 |"});
  expect_contains(lines[2], {" iteration        6/      10 |", " consumed samples:           24 |"});
}

TEST(IterationLogger, AResumedRunPrintsAfterItsOwnFirstIteration) {
  std::ostringstream out;
  IterationLogger logger(settings(), out, nullptr);
  logger.start(4);  // resumed from a checkpoint of iteration 4
  logger.step(StepReport{2.0, false, 0.0, {}, {}}, at(5));
  logger.step(StepReport{2.0, false, 0.0, {}, {}}, at(6));
  const auto lines = lines_of(out);
  ASSERT_EQ(lines.size(), 2u);
  expect_contains(lines[0], {" iteration        5/      10 |"});
  expect_contains(lines[1], {" iteration        6/      10 |"});
}

TEST(IterationLogger, LossIsTheMeanOfTheIntervalsUpdatedIterations) {
  std::ostringstream out;
  IterationLogger logger(settings(), out, nullptr);
  logger.start(0);
  // Iterations 1-3: 3, 2, 1. The line after iteration 1 does not end the interval: the mean at 3
  // is (3 + 2 + 1) / 3 = 2.
  logger.step(StepReport{3.0, false, 0.0, {}, {}}, at(1));
  logger.step(StepReport{2.0, false, 0.0, {}, {}}, at(2));
  logger.step(StepReport{1.0, false, 0.0, {}, {}}, at(3));
  // Iterations 4-6: 4, a skipped step (its loss left out), 1: (4 + 1) / 2 = 2.5.
  logger.step(StepReport{4.0, false, 0.0, {}, {}}, at(4));
  logger.step(StepReport{100.0, true, 0.0, {}, {}}, at(5));
  logger.step(StepReport{1.0, false, 0.0, {}, {}}, at(6));
  const auto lines = lines_of(out);
  ASSERT_EQ(lines.size(), 3u);
  expect_contains(lines[0], {" lm loss: 3.000000E+00 |", " number of skipped iterations:   0 |"});
  expect_contains(lines[1], {" lm loss: 2.000000E+00 | loss scale: 1.0 |", " number of skipped iterations:   0 |",
                             " number of nan iterations:   0 |"});
  expect_contains(lines[2], {" lm loss: 2.500000E+00 |", " number of skipped iterations:   1 |"});
}

TEST(IterationLogger, AnIntervalOfSkippedStepsOnlyPrintsNoLoss) {
  std::ostringstream out;
  IterationLogger logger(settings(), out, nullptr);
  logger.start(3);
  for (std::int64_t it = 4; it <= 6; ++it) logger.step(StepReport{5.0, true, 0.0, {}, {}}, at(it));
  const auto lines = lines_of(out);
  ASSERT_EQ(lines.size(), 2u);  // after 4 (the run's first) and at 6
  for (const auto& line : lines) EXPECT_FALSE(has(line, "lm loss")) << line;
  expect_contains(lines[0], {" number of skipped iterations:   1 |"});
  expect_contains(lines[1], {" number of skipped iterations:   3 |"});
  // The next interval counts afresh.
  for (std::int64_t it = 7; it <= 9; ++it) logger.step(StepReport{0.5, false, 0.0, {}, {}}, at(it));
  expect_contains(lines_of(out).back(), {" lm loss: 5.000000E-01 |", " number of skipped iterations:   0 |"});
}

TEST(IterationLogger, ShowsTheGradNormOnlyWhenAsked) {
  for (const bool show : {false, true}) {
    std::ostringstream out;
    IterationLogger logger(settings(show), out, nullptr);
    logger.start(0);
    logger.step(StepReport{1.0, false, 0.5, {}, {}}, at(1));
    logger.step(StepReport{1.0, false, 0.75, {}, {}}, at(2));
    logger.step(StepReport{1.0, false, 1.5, {}, {}}, at(3));
    const auto lines = lines_of(out);
    ASSERT_EQ(lines.size(), 2u);
    if (show) {
      // The norm of the iteration the line is printed at, as Megatron shows it.
      expect_contains(lines[0], {" loss scale: 1.0 | grad norm: 0.500 | number of skipped"});
      expect_contains(lines[1], {" loss scale: 1.0 | grad norm: 1.500 | number of skipped"});
    } else {
      for (const auto& line : lines) EXPECT_FALSE(has(line, "grad norm")) << line;
    }
  }
}

TEST(IterationLogger, ValidationBlockHasMegatronsFrame) {
  std::ostringstream out;
  IterationLogger logger(settings(), out, nullptr);
  logger.start(0);
  logger.validation("iteration 6", 2.0, at(6), true);
  // exp(2) = 7.3890560989...
  const std::string middle = " validation loss at iteration 6 | lm loss value: 2.000000E+00 | "
                             "lm loss PPL: 7.389056E+00 | ";
  const std::string dashes(middle.size() + 1, '-');
  EXPECT_EQ(out.str(), dashes + "\n" + middle + "\n" + dashes + "\n");
}

TEST(IterationLogger, PrintsNoMemoryLineOnTheCpu) {
  std::ostringstream out, memory;
  LoggerSettings s = settings();
  s.memory_out = &memory;
  IterationLogger logger(s, out, nullptr);
  logger.start(0);
  for (std::int64_t it = 1; it <= 3; ++it) logger.step(StepReport{1.0, false, 0.0, {}, {}}, at(it));
  EXPECT_EQ(lines_of(out).size(), 2u);
  EXPECT_EQ(memory.str(), "");
}

TEST(IterationLogger, WritesItsScalarsToTheEventFileOnFlush) {
  if (!tensorboard_available()) GTEST_SKIP() << "built without protobuf/ISA-L";
  testing::TempDir dir("iteration_logger");
  auto writer = std::make_unique<TensorBoardWriter>(dir / "tb", 1000);  // nothing written before a flush
  const std::string path = writer->path();
  std::ostringstream out;
  IterationLogger logger(settings(), out, std::move(writer));
  logger.start(0);
  for (std::int64_t it = 1; it <= 3; ++it) logger.step(StepReport{1.0, false, 0.25, {}, {}}, at(it));
  const auto before = std::filesystem::file_size(path);
  const std::string unflushed = testing::read_file_bytes(path);
  EXPECT_FALSE(has(unflushed, "lm loss")) << "queued until the flush";
  logger.flush();
  const auto after = std::filesystem::file_size(path);
  EXPECT_GT(after, before);
  // The tags are stored as plain strings inside the records.
  const std::string events = testing::read_file_bytes(path);
  for (const char* tag : {"lm loss", "lm loss vs samples", "learning-rate", "batch-size", "loss-scale"}) {
    EXPECT_TRUE(has(events, tag)) << tag;
  }
  EXPECT_FALSE(has(events, "grad-norm"));   // not shown without --clip-grad or mixed precision
  EXPECT_FALSE(has(events, "world-size"));  // --log-world-size-to-tensorboard is off
  // A validation result is written out at once.
  logger.validation("iteration 3", 2.0, at(3), true);
  EXPECT_GT(std::filesystem::file_size(path), after);
  EXPECT_TRUE(has(testing::read_file_bytes(path), "lm loss validation"));
}

}  // namespace
}  // namespace megatron::train
