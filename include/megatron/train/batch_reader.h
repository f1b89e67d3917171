// The trainer's data step (DESIGN 4: batch sampler -> prefetch thread -> Trainer): this DP rank's
// micro-batches of one split in Megatron's sampler order (spec 4.11) as tensors on the training
// device. With prefetching, a background thread samples, reads and builds the next micro-batches
// (in pinned host memory when the device is a GPU) while the model computes, and next() starts
// their non-blocking copies; without, all of it happens inside next(). Either way the batches and
// their order are the same. The data module never allocates a tensor: this is where token spans
// become tensors.
#pragma once

#include <ATen/ATen.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "megatron/data/data_sampler.h"
#include "megatron/data/gpt_dataset.h"

namespace megatron::train {

// Under context parallelism s is this rank's two chunks of the sequence; loss_tokens still counts
// the whole sequence's (every CP rank's share), local_loss_tokens this rank's.
struct MicroBatch {
  at::Tensor tokens;          // [b, s] int64
  at::Tensor labels;          // [b, s] int64
  at::Tensor loss_mask;       // [b, s] float
  at::Tensor position_ids;    // [b, s] int64
  at::Tensor attention_mask;  // [b, 1, s, s] bool (true = masked), or undefined (plain causal)
  double loss_tokens = 0.0;   // loss_mask's sum, counted on the host while the batch is made
  double local_loss_tokens = 0.0;
};

struct BatchReaderOptions {
  int micro_batch_size = 1;
  int dp_rank = 0;
  int dp_size = 1;
  // Micro-batches a background thread keeps ready; 0 reads each one inside next().
  int prefetch = 0;
  at::Device device = at::kCPU;  // where next() delivers the tensors
  // Context parallelism: every CP rank reads the same samples and keeps its two chunks of each
  // sequence (parallel::cp_local_chunks).
  int cp = 1;
  int cp_rank = 0;
};

class BatchReader {
 public:
  // Reads `dataset` from `consumed_samples` on (the samples every DP rank consumed so far). Throws
  // megatron::Error when the split has no sample left there.
  BatchReader(const data::SampleDataset& dataset, std::uint64_t consumed_samples, const BatchReaderOptions& options);
  ~BatchReader();  // stops the prefetch thread
  BatchReader(const BatchReader&) = delete;
  BatchReader& operator=(const BatchReader&) = delete;

  // The next micro-batch on the device (its copies may still be in flight on the current stream,
  // which orders them before any kernel that uses them); nullopt when the split has no complete
  // step batch left. An error met by the prefetch thread is thrown here, in order.
  std::optional<MicroBatch> next();

 private:
  std::optional<MicroBatch> read();  // one micro-batch in host memory
  void prefetch_loop();

  const data::SampleDataset* dataset_;
  data::PretrainingSampler sampler_;
  BatchReaderOptions options_;
  bool pinned_ = false;
  std::vector<std::uint64_t> indices_;

  // The prefetch thread's queue: batches, then an end marker (nullopt) or an error.
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::optional<MicroBatch>> ready_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace megatron::train
