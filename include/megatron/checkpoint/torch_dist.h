// Megatron-Core's distributed checkpoints (`--ckpt-format torch_dist`, Megatron's default), read
// here: iter_XXXXXXX/ is a torch.distributed.checkpoint folder (DcpCheckpoint) whose tensors are
// the model's *global* tensors under Megatron's sharded names, transformer layers stacked on a
// leading layer axis (torch_dist_names.h), plus metadata.json naming the backend and the common
// state (Megatron's `args` Namespace, the iteration, the scheduler, the FLOP count) in common.pt.
// Each rank reads only the blocks of the global tensors its parameters cover, so any TP x PP layout
// Megatron saved loads into any layout here.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "megatron/checkpoint/checkpoint.h"
#include "megatron/checkpoint/reshard.h"
#include "megatron/model/model_config.h"

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

// Writing. What one rank writes of its model: per tensor (by its name in CheckpointState::model),
// the chunks of Megatron's global tensors it holds (one, or SwiGLU's fc1 two: its gate and up
// blocks), each a slice of the local tensor; and the `_extra_state` bytes items of its layers.
// A tensor without chunks is written by another rank (a replica over data, or expert, parallelism;
// the output layer that is the word embedding).
struct TorchDistChunk {
  std::string key;                                 // Megatron's sharded key
  std::vector<std::int64_t> global_shape, offsets;  // the global tensor, and where the chunk lies
  int dim = 0;                                     // the local tensor's slice along `dim` ...
  std::int64_t start = 0, length = -1;             // ... [start, start + length); -1: all of it
  bool layer_axis = false;                         // the global tensor stacks layers: the chunk has it (size 1)
};
struct TorchDistPlan {
  std::map<std::string, std::vector<TorchDistChunk>> chunks;
  std::vector<std::string> extra_states;  // keys of bytes items holding torch.save([None])
  SavedLayout layout;  // the run's parallel sizes, for Megatron's args (rank 0)
};
// `target`: this rank's parameters and layout (as for load_torch_dist); `writes_model`: this rank
// writes its model-parallel shard's tensors (rank 0 of its checkpoint shard group). Dense tensors
// are written by expert-parallel rank 0 alone, an EP rank's experts by that rank. Throws for an
// expert-tensor-parallel size other than TP (not written in this format yet).
TorchDistPlan plan_torch_dist(const ReshardTarget& target, const model::ModelConfig& model, bool writes_model);

// Writes this rank's chunks of `model` (CheckpointState::model) as `plan` says into
// <folder>/<file>; returns the items written (for write_dcp_metadata, on rank 0).
struct DcpEntry;
std::vector<DcpEntry> write_torch_dist_shard(const std::string& folder, const std::string& file,
                                             const NamedTensors& model, const TorchDistPlan& plan);

// Rank 0, once every rank wrote its items: <folder>/.metadata, common.pt (Megatron's args
// Namespace from the run configuration and `layout`, checkpoint_version 3.0, the iteration, the
// scheduler, the FLOP count; from `meta`, meta_without_files' JSON), and metadata.json last.
void write_torch_dist_common(const std::string& folder, const std::vector<DcpEntry>& entries,
                             const nlohmann::json& meta, const SavedLayout& layout);

// One process writes a whole model-only torch_dist checkpoint (converters), as
// write_new_checkpoint does: `params` the whole model's parameters (every layer under its global
// number) with their TP layouts, written as the TP x EP ranks of `layout` hold them (one file each;
// the pipeline split changes nothing in this format but Megatron's args); counters and the run's
// record from `common`.
void save_torch_dist_model(const std::string& root, const CheckpointState& common, const NamedTensors& params,
                           const std::vector<parallel::TensorParallelLayout>& layouts, const model::ModelConfig& model,
                           const SavedLayout& layout);

inline constexpr const char* kTorchDistCommonFile = "common.pt";  // Megatron-Core up to about 0.14

}  // namespace megatron::checkpoint
