// The run's counters: their checkpoint round trip (exact, also past 2^31 and with fractional FLOPs)
// and how an iteration advances them, skipped or not, as Megatron counts.
#include "megatron/train/train_state.h"

#include <gtest/gtest.h>

#include "megatron/checkpoint/checkpoint.h"
#include "test_support.h"

namespace megatron::train {
namespace {

using testing::TempDir;

TEST(TrainState, RoundTripsThroughACheckpointExactlyPastTwoToThe31) {
  TempDir dir("train_state");
  const std::string root = dir / "run";
  // 2^31 = 2147483648 and 2^32 = 4294967296: none of these fits an int32.
  const TrainState saved{3'000'000'007, 96'000'000'224, 4'294'967'301, 1.2345678901234567e21};
  checkpoint::CheckpointState state;
  saved.write_to(state);
  state.config = {{"num_layers", 1}};
  state.model = {{"decoder.final_layernorm.weight", at::ones({4})}};
  checkpoint::save_checkpoint(root, state, "mp_rank_00");

  ASSERT_EQ(checkpoint::read_tracker(root), 3'000'000'007);
  const TrainState loaded =
      TrainState::read_from(checkpoint::load_checkpoint(root, 3'000'000'007, "mp_rank_00", false, false));
  EXPECT_EQ(loaded.iteration, 3'000'000'007);
  EXPECT_EQ(loaded.consumed_train_samples, 96'000'000'224);
  EXPECT_EQ(loaded.consumed_valid_samples, 4'294'967'301);
  EXPECT_EQ(loaded.floating_point_operations_so_far, 1.2345678901234567e21);  // bit for bit
}

TEST(TrainState, KeepsAFractionalFlopCountToTheLastBit) {
  TempDir dir("train_state");
  const std::string root = dir / "run";
  // 1e6 / 3 = 333333.3333333333...: written with 15 significant digits it would come back as
  // 333333.333333333, another double.
  const double flops = 1e6 / 3.0;
  checkpoint::CheckpointState state;
  TrainState{7, 14, 0, flops}.write_to(state);
  state.config = {{"num_layers", 1}};
  state.model = {{"decoder.final_layernorm.weight", at::ones({4})}};
  checkpoint::save_checkpoint(root, state, "mp_rank_00");
  const TrainState loaded = TrainState::read_from(checkpoint::load_checkpoint(root, 7, "mp_rank_00", false, false));
  EXPECT_EQ(loaded.floating_point_operations_so_far, flops);
  EXPECT_NE(loaded.floating_point_operations_so_far, 333333.333333333);
  EXPECT_EQ(loaded.iteration, 7);
  EXPECT_EQ(loaded.consumed_train_samples, 14);
}

TEST(TrainState, WritesOnlyItsCountersIntoTheCheckpointState) {
  checkpoint::CheckpointState state;
  state.scheduler_num_steps = 77;
  state.optimizer_steps = 5;
  TrainState{12, 192, 64, 3.5e12}.write_to(state);
  EXPECT_EQ(state.iteration, 12);
  EXPECT_EQ(state.consumed_train_samples, 192);
  EXPECT_EQ(state.consumed_valid_samples, 64);
  EXPECT_EQ(state.floating_point_operations_so_far, 3.5e12);
  EXPECT_EQ(state.scheduler_num_steps, 77);  // the scheduler's and optimizer's counters are not its own
  EXPECT_EQ(state.optimizer_steps, 5);
}

TEST(TrainState, AdvanceCountsEveryIterationSkippedOrNot) {
  // Megatron's train loop: iteration += 1 and consumed_train_samples += global batch after every
  // train_step, whether the loss scaler skipped the update or not; validation samples untouched.
  TrainState s{10, 160, 32, 1e15};
  s.advance(16, 2.5e14);  // an update
  s.advance(16, 2.5e14);  // skipped by the loss scaler: counted all the same
  s.advance(16, 2.5e14);
  EXPECT_EQ(s.iteration, 13);
  EXPECT_EQ(s.consumed_train_samples, 208);  // 160 + 3 x 16
  EXPECT_EQ(s.consumed_valid_samples, 32);
  EXPECT_EQ(s.floating_point_operations_so_far, 1.75e15);  // 1e15 + 3 x 2.5e14

  TrainState fresh;
  fresh.advance(1024, 0.0);
  EXPECT_EQ(fresh.iteration, 1);
  EXPECT_EQ(fresh.consumed_train_samples, 1024);
}

}  // namespace
}  // namespace megatron::train
