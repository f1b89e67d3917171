// Checkpoints in Megatron's folder layout (spec 7.1): <root>/latest_checkpointed_iteration.txt
// holding the iteration, and <root>/iter_0000100/mp_rank_00/ with our contents: model.safetensors
// (Megatron parameter names), optimizer.safetensors, rng.safetensors and meta.json (iteration,
// consumed samples, scheduler and optimizer counters, the resolved config, and size + CRC-32 of
// every file). Commit protocol: everything is written into iter_XXXXXXX.tmp.<pid>/ and fsynced,
// the folder is renamed into place, and only then the tracker file is replaced. A crash at any
// moment leaves the previous checkpoint loadable; a corrupt or partial one is refused by name.
// A signal during a save removes the temporary folder (TemporaryFolder), a SIGKILL leftover goes
// at the next start (remove_stale_temporaries).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "megatron/checkpoint/safetensors.h"
#include "megatron/core/process_lock.h"

namespace megatron::checkpoint {

inline constexpr const char* kTrackerFile = "latest_checkpointed_iteration.txt";
inline constexpr const char* kRunConfigFile = "run_config.json";  // the trainer's, beside the tracker
inline constexpr int kFormatVersion = 1;

struct CheckpointState {
  std::int64_t iteration = 0;
  std::int64_t consumed_train_samples = 0;
  std::int64_t consumed_valid_samples = 0;
  std::int64_t scheduler_num_steps = 0;
  std::int64_t optimizer_steps = 0;
  double floating_point_operations_so_far = 0.0;
  nlohmann::json config;   // the resolved run configuration
  NamedTensors model;      // Megatron names
  NamedTensors optimizer;  // empty when not saved (--no-save-optim)
  NamedTensors rng;        // generator states, uint8 tensors
};

// "<root>/iter_0000100".
std::string iteration_folder(const std::string& root, std::int64_t iteration);

// Writes the checkpoint of `state.iteration` for one model-parallel shard ("mp_rank_00") and then
// the tracker. Throws megatron::Error naming what could not be written; nothing half-written is
// left under a final name.
void save_checkpoint(const std::string& root, const CheckpointState& state, const std::string& shard);

// Creates <root> and locks <root>/.lock against a second run saving there (held until the
// returned lock is destroyed or the process ends); throws naming the process holding it.
std::unique_ptr<OutputLock> lock_save_folder(const std::string& root);

// True for the names a save writes into <root>: iter_XXXXXXX, the tracker and the run config.
bool is_checkpoint_output(std::string_view name);

// At start, with the --save lock held: removes <root>'s temporaries (iter_XXXXXXX.tmp.<pid>/,
// tracker and run-config .tmp files) of processes that are gone. Returns their paths.
std::vector<std::string> remove_stale_temporaries(const std::string& root);

// The iteration in <root>/latest_checkpointed_iteration.txt; nullopt when the file does not exist
// (no checkpoint yet). Throws when it exists but is not a non-negative integer.
std::optional<std::int64_t> read_tracker(const std::string& root);

// Reads and verifies (sizes, CRC-32) one shard of a checkpoint. The optimizer and RNG states are
// read only when asked for; asking for an optimizer state that was not saved is an error.
CheckpointState load_checkpoint(const std::string& root, std::int64_t iteration, const std::string& shard,
                                bool load_optimizer, bool load_rng);

}  // namespace megatron::checkpoint
