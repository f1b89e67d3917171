// Megatron's theoretical memory footprint (report_theoretical_memory, as in core_v0.12.0): the
// weights and optimizer state of the most loaded model shard (18 bytes per parameter, or
// 6 + 12 / DP with the distributed optimizer), and, when the run uses sequence parallelism with
// selective recomputation (the case its activation formula, from Korthikanti et al. 2022, Table 2,
// assumes), the first pipeline stage's activations. Computed from the model and the layout alone,
// so it is printed before anything is allocated; the lines are Megatron's, word for word.
//
// This is Megatron's estimate, kept as Megatron prints it for users who compare the two; it
// ignores biases, uneven pipeline splits and the precision. The exact per-rank need this run
// checks before allocating is the memory preflight's (memory_preflight.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "megatron/model/model_config.h"

namespace megatron::train {

struct TheoreticalMemoryInputs {
  model::ModelConfig model;  // padded_vocab_size resolved
  int tp = 1, pp = 1, dp = 1;
  int virtual_stages = 0;  // model chunks per pipeline rank with the interleaved schedule, else 0
  bool distributed_optimizer = false;
  std::int64_t micro_batch_size = 1;
  std::int64_t num_microbatches = 1;
};

struct TheoreticalMemory {
  double weight_and_optimizer_mb = 0;  // MiB, as Megatron's "MB"
  std::optional<double> activation_mb;  // only with --sequence-parallel and selective recomputation
  std::vector<std::string> lines;       // what Megatron prints (rank 0, verbose)
};

TheoreticalMemory theoretical_memory(const TheoreticalMemoryInputs& in);

}  // namespace megatron::train
