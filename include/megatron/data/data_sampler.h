// How many samples each split is asked for (training.py get_train_valid_test_num_samples,
// spec 4.1) and which dataset indices a data-parallel rank reads (MegatronPretrainingSampler,
// spec 4.11): consecutive indices from consumed_samples, mbs * dp per step batch, rank r's
// slice [r * mbs, (r + 1) * mbs), the trailing partial batch dropped.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "megatron/data/dataset_builder.h"

namespace megatron::data {

struct SampleCountArgs {
  std::optional<std::int64_t> train_samples;  // --train-samples
  std::int64_t train_iters = 0;               // --train-iters (or derived from train_samples)
  std::int64_t global_batch_size = 1;         // --global-batch-size
  std::int64_t eval_interval = 1000;          // --eval-interval
  std::int64_t eval_iters = 100;              // --eval-iters
  std::optional<std::int64_t> eval_global_batch_size;  // defaults to global_batch_size
  bool full_validation = false;                        // --full-validation: one pass, no count
};

// train: train_samples, else train_iters * gbs; valid: (train_iters // eval_interval + 1) *
// eval_iters * eval_gbs (none with full_validation); test: eval_iters * eval_gbs.
SplitSamples train_valid_test_num_samples(const SampleCountArgs& args);

// The lines Megatron prints: " > datasets target sizes (minimum size):" and one per split.
std::string format_target_sizes(const SplitSamples& samples);

class PretrainingSampler {
 public:
  // Throws megatron::Error when total_samples is 0, consumed_samples >= total_samples,
  // micro_batch_size is not positive or the rank is not below dp.
  PretrainingSampler(std::uint64_t total_samples, std::uint64_t consumed_samples,
                     std::int64_t micro_batch_size, std::int64_t dp_rank, std::int64_t dp_size);

  // The next micro batch of this rank's dataset indices; false when no complete step batch
  // (mbs * dp indices) is left.
  bool next(std::vector<std::uint64_t>& indices);

  std::uint64_t consumed_samples() const { return consumed_; }

 private:
  std::uint64_t total_;
  std::uint64_t consumed_;
  std::uint64_t micro_batch_size_;
  std::uint64_t dp_rank_;
  std::uint64_t dp_size_;
};

}  // namespace megatron::data
