// Requested sample counts and the data-parallel pretraining sampler (see data_sampler.h).
#include "megatron/data/data_sampler.h"

#include "megatron/core/check.h"

namespace megatron::data {

SplitSamples train_valid_test_num_samples(const SampleCountArgs& args) {
  MEGATRON_CHECK(args.eval_interval > 0, "--eval-interval must be positive, got ",
                 args.eval_interval);
  const std::int64_t eval_gbs = args.eval_global_batch_size.value_or(args.global_batch_size);
  SplitSamples out;
  out[0] = args.train_samples.value_or(args.train_iters * args.global_batch_size);
  if (!args.full_validation) {
    out[1] = (args.train_iters / args.eval_interval + 1) * args.eval_iters * eval_gbs;
  }
  out[2] = args.eval_iters * eval_gbs;
  return out;
}

std::string format_target_sizes(const SplitSamples& samples) {
  const auto text = [](const std::optional<std::int64_t>& n) {
    return n.has_value() ? std::to_string(*n) : std::string("None");
  };
  return " > datasets target sizes (minimum size):\n    train:      " + text(samples[0]) +
         "\n    validation: " + text(samples[1]) + "\n    test:       " + text(samples[2]) + "\n";
}

PretrainingSampler::PretrainingSampler(std::uint64_t total_samples, std::uint64_t consumed_samples,
                                       std::int64_t micro_batch_size, std::int64_t dp_rank,
                                       std::int64_t dp_size)
    : total_(total_samples), consumed_(consumed_samples) {
  MEGATRON_CHECK(total_samples > 0, "no sample to consume: the dataset is empty");
  MEGATRON_CHECK(consumed_samples < total_samples, "no samples left to consume: ", consumed_samples,
                 " of ", total_samples, " already consumed");
  MEGATRON_CHECK(micro_batch_size > 0, "--micro-batch-size must be positive, got ",
                 micro_batch_size);
  MEGATRON_CHECK(dp_size > 0 && dp_rank >= 0 && dp_rank < dp_size, "data-parallel rank ", dp_rank,
                 " is not below the data-parallel size ", dp_size);
  micro_batch_size_ = static_cast<std::uint64_t>(micro_batch_size);
  dp_rank_ = static_cast<std::uint64_t>(dp_rank);
  dp_size_ = static_cast<std::uint64_t>(dp_size);
}

bool PretrainingSampler::next(std::vector<std::uint64_t>& indices) {
  const std::uint64_t step = micro_batch_size_ * dp_size_;
  if (consumed_ + step > total_) return false;
  indices.resize(micro_batch_size_);
  const std::uint64_t first = consumed_ + dp_rank_ * micro_batch_size_;
  for (std::uint64_t i = 0; i < micro_batch_size_; ++i) indices[i] = first + i;
  consumed_ += step;
  return true;
}

}  // namespace megatron::data
