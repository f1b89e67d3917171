// The memory preflight: once the rank grid exists and before any parameter is allocated, what this
// rank's share of the model needs for training (its parameters, their gradients and the optimizer
// state, sharded by TP and PP, and by DP with the distributed optimizer, at the run's precision),
// against the memory of the device it trains on: its GPU, or on CPU ranks the host's memory shared
// by the node's local ranks. A lower bound: activations beyond one layer's explicit attention
// scores, communication buffers and the allocator's slack are not counted, so a run refused here
// could never have trained, and one that passes may still run out later.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "megatron/model/model_config.h"

namespace megatron::train {

// This rank's place in the layout, as far as memory goes.
struct RankShare {
  int rank = 0;
  int tp = 1, tp_rank = 0;
  int pp = 1, pp_rank = 0;
  int dp = 1;  // the ranks the distributed optimizer shards over: DP x CP
  std::vector<std::int64_t> chunk_layers{0};  // transformer layers of each model chunk it holds
  int ep = 1;         // expert-parallel size: the rank holds 1/ep of each MoE layer's experts
  int expert_dp = 1;  // the ranks the distributed optimizer shards the experts over
  int expert_tp = 0;  // each expert split over this many ranks (0: tp)
};

// The run's numerics and the sizes that scale activations.
struct MemorySettings {
  int param_bytes = 4;                 // 4 in fp32, 2 with --bf16 / --fp16
  bool grad_in_fp32 = true;            // the data-parallel gradient buffer's element size 4 (else param_bytes)
  bool distributed_optimizer = false;  // main weights and Adam moments sharded over DP
  int micro_batch_size = 1;
  bool explicit_attention = false;     // attention computes the [b, np/tp, s, s] scores (not SDPA)
};

struct MemoryNeed {
  std::int64_t parameters = 0;       // elements this rank holds
  std::int64_t parameter_bytes = 0;  // the model's parameters
  std::int64_t gradient_bytes = 0;   // the data-parallel gradient buffer
  std::int64_t optimizer_bytes = 0;  // fp32 main weights (mixed precision) and two Adam moments
  std::int64_t score_bytes = 0;      // one layer's attention scores in fp32 (explicit attention)
  std::int64_t total() const;        // saturating
};

// The device's memory this rank may use, and how to name it in a message.
struct DeviceMemory {
  std::int64_t bytes = 0;
  std::string description;  // "cuda:0 (NVIDIA H100 80GB HBM3)", "this node's memory shared by its 4 local ranks"
};

// What `share` needs to train `config` with `settings`; saturates instead of wrapping.
MemoryNeed rank_memory_need(const model::ModelConfig& config, const RankShare& share, const MemorySettings& settings);

// The memory of `device`: a GPU's total memory; on the CPU the host's physical memory (or a lower
// cgroup limit) divided among `local_ranks` processes.
DeviceMemory device_memory(const at::Device& device, int local_ranks);

// Throws megatron::Error when `need` exceeds `device`: the rank and its place, the need part by
// part, the device's size, and the flags that would lower the need.
void check_memory_fits(const model::ModelConfig& config, const RankShare& share, const MemorySettings& settings,
                       const DeviceMemory& device);

}  // namespace megatron::train
