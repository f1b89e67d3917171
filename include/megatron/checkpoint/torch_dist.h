// Megatron-Core's distributed checkpoints (`--ckpt-format torch_dist`, Megatron's default), read
// here: iter_XXXXXXX/ is a torch.distributed.checkpoint folder (DcpCheckpoint) whose tensors are
// the model's *global* tensors under Megatron's sharded names, transformer layers stacked on a
// leading layer axis (torch_dist_names.h), plus metadata.json naming the backend and the common
// state (Megatron's `args` Namespace, the iteration, the scheduler, the FLOP count) in common.pt.
// Each rank reads only the blocks of the global tensors its parameters cover, so any TP x PP layout
// Megatron saved loads into any layout here.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "megatron/checkpoint/checkpoint.h"
#include "megatron/checkpoint/reshard.h"

namespace megatron::checkpoint {

inline constexpr const char* kTorchDistMetadataFile = "metadata.json";  // in iter_XXXXXXX/, written last

// Whether <folder> (an iter_XXXXXXX) is a torch_dist checkpoint: its metadata.json names the
// torch_dist backend. Throws naming the file when metadata.json exists but names another backend
// or is not JSON.
bool is_torch_dist(const std::string& folder);

// The common state of a torch_dist checkpoint, and what it records of the run: counters (iteration,
// consumed samples, the scheduler's state and step count, the FLOP count), the run configuration
// (SavedRun's JSON, from Megatron's `args`), and in `layout` the TP and PP sizes it was saved with.
// No tensors. Throws naming the file for a common state that cannot be read.
struct TorchDistRun {
  CheckpointState state;
  SavedLayout layout;
  nlohmann::json args;  // Megatron's args Namespace: its plain values (others null)
};
TorchDistRun read_torch_dist_run(const std::string& root, std::int64_t iteration);

// This rank's parameters (`target`, the current layout) read from the global tensors of a torch_dist
// checkpoint, with the counters and configuration of read_torch_dist_run. Throws naming the
// checkpoint for a tensor it lacks or whose global shape does not fit this model.
CheckpointState load_torch_dist(const std::string& root, std::int64_t iteration, const ReshardTarget& target);

}  // namespace megatron::checkpoint
