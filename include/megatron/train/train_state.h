// The counters a run carries from iteration to iteration and across checkpoints (Megatron's
// iteration, consumed train/valid samples and floating-point operations so far), with their
// checkpoint round trip: what a resume restores unless --finetune starts them afresh. And what
// one training step reports.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "megatron/checkpoint/checkpoint.h"

namespace megatron::train {

struct TrainState {
  std::int64_t iteration = 0;
  std::int64_t consumed_train_samples = 0;
  std::int64_t consumed_valid_samples = 0;
  double floating_point_operations_so_far = 0.0;

  // One training iteration of `global_batch_size` samples and `flops` operations. A step the
  // loss scaler skipped counts too: Megatron advances the iteration and the samples either way.
  void advance(std::int64_t global_batch_size, double flops) {
    ++iteration;
    consumed_train_samples += global_batch_size;
    floating_point_operations_so_far += flops;
  }

  void write_to(checkpoint::CheckpointState& state) const {
    state.iteration = iteration;
    state.consumed_train_samples = consumed_train_samples;
    state.consumed_valid_samples = consumed_valid_samples;
    state.floating_point_operations_so_far = floating_point_operations_so_far;
  }

  static TrainState read_from(const checkpoint::CheckpointState& state) {
    return {state.iteration, state.consumed_train_samples, state.consumed_valid_samples,
            state.floating_point_operations_so_far};
  }
};

// One training step as it ended: its loss (the last pipeline stage's; 0 elsewhere), whether the
// loss scaler skipped it, and the gradient norm the optimizer saw.
struct StepReport {
  double loss = 0.0;
  bool skipped = false;
  double grad_norm = 0.0;
  // MoE models: the auxiliary losses as Megatron logs them (z_loss, load_balancing_loss), each
  // averaged over the MoE layers and micro-batches and over DP, on every rank.
  std::vector<std::pair<std::string, double>> moe_losses;
  // With --moe-per-layer-logging: each layer's values before the average over the MoE layers, under
  // Megatron's TensorBoard names ("moe/load_balancing_loss_layer_<i>", every layer of the model, 0
  // for dense ones).
  std::vector<std::pair<std::string, double>> moe_layer_losses;
};

}  // namespace megatron::train
