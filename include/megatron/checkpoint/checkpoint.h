// Checkpoints in Megatron's folder layout (spec 7.1): <root>/latest_checkpointed_iteration.txt
// holding the iteration, and <root>/iter_0000100/mp_rank_TT[_PPP]/ per model-parallel shard with
// our contents: model.safetensors (Megatron parameter names, this shard's tensors), rng.safetensors,
// the optimizer state (optimizer.safetensors, or with the distributed optimizer one
// distrib_optim.dp_rank_RRR.safetensors per rank of the data-parallel x context-parallel group
// it shards over) and meta.json (iteration, consumed samples, scheduler and optimizer counters,
// the resolved config, and size + CRC-32 of every file of the shard). Model, RNG and meta.json are
// written by DP (and CP) rank 0 of each shard; copies of the
// tokenizer's files go into <root>/iter_0000100/tokenizer/ (rank 0), as Megatron's
// save_tokenizer_assets puts them, so a checkpoint moved elsewhere still decodes and exports.
// Commit protocol (collective over the world): rank 0 makes iter_XXXXXXX.tmp.<its pid>/, every
// rank writes and fsyncs its files there, the writers' digests are gathered into meta.json, every
// rank reports success or failure, and only when all succeeded rank 0 renames the folder into
// place and then replaces the tracker. A crash or kill of any rank at any moment leaves the
// previous checkpoint loadable and the tracker untouched; a corrupt or partial one is refused by
// name. A signal during a save removes the temporary folder (TemporaryFolder), a SIGKILL leftover
// goes at the next start (remove_stale_temporaries).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "megatron/checkpoint/safetensors.h"
#include "megatron/core/process_lock.h"
#include "megatron/parallel/parallel_context.h"

namespace megatron::checkpoint {

inline constexpr const char* kTrackerFile = "latest_checkpointed_iteration.txt";
inline constexpr const char* kRunConfigFile = "run_config.json";  // the trainer's, beside the tracker
inline constexpr int kFormatVersion = 1;
inline constexpr const char* kTokenizerFolder = "tokenizer";  // in each iter_XXXXXXX

// Files copied into a checkpoint: (name, bytes), read once and shared by every save.
using AssetFiles = std::vector<std::pair<std::string, std::string>>;

struct CheckpointState {
  std::int64_t iteration = 0;
  std::int64_t consumed_train_samples = 0;
  std::int64_t consumed_valid_samples = 0;
  std::int64_t scheduler_num_steps = 0;
  nlohmann::json scheduler;  // the learning-rate scheduler's state (Megatron's opt_param_scheduler); null in older checkpoints
  std::int64_t optimizer_steps = 0;
  double floating_point_operations_so_far = 0.0;
  nlohmann::json config;   // the resolved run configuration
  NamedTensors model;      // Megatron names
  NamedTensors optimizer;  // this rank's optimizer state; empty when not saved (--no-save-optim)
  NamedTensors rng;        // generator states, uint8 tensors
  nlohmann::json grad_scaler;  // the loss scaler's state (fp16), null without one
  std::shared_ptr<const AssetFiles> tokenizer_files;  // into iter_XXXXXXX/tokenizer/ (rank 0); may be null
  // Loaded only: the optimizer state of every file of the shard (one per DP rank that wrote
  // one), for an optimizer that re-splits it over the current data-parallel size.
  std::vector<NamedTensors> optimizer_parts;
};

struct TorchDistPlan;  // torch_dist.h

// Which files this rank writes into its shard folder. Under expert parallelism each EP rank has
// folders of its own (mp_rank_TT[_PPP]_EEE) and their writers are the ranks sharing the folder
// (ParallelState::checkpoint_shard_group; the expert-data-parallel group when the experts' TP size
// is TP): dense parameters are in every EP rank's folder, its experts only in its own, and the
// distributed optimizer's shards spread over the files of every folder holding the same tensors.
struct ShardWriter {
  std::string shard = "mp_rank_00";  // ShardName::of(the rank's ParallelState)
  bool model = true;                 // model, RNG and meta.json: rank 0 of `group`
  // Optimizer state: with the distributed optimizer every rank of `group` writes its own file;
  // otherwise only the model writer writes optimizer.safetensors.
  bool distributed_optimizer = false;
  int dp_rank = 0;  // the rank in `group`
  int dp_size = 1;  // the size of `group`: meta.json's data_parallel_size
  int ep = 1;       // the expert-parallel size: meta.json's expert_model_parallel_size
  // meta.json's tensor_model_parallel_size and expert_tensor_parallel_size; 0: not recorded (a
  // converter's shards, whose TP is the folders' count and the experts' TP the same).
  int tp = 0;
  int etp = 0;
  // The ranks writing into this shard folder: DP x CP, or the expert-data-parallel group under
  // expert parallelism. Null: the context's DP x CP group.
  const parallel::ProcessGroup* group = nullptr;
  // Set: the checkpoint is Megatron-Core's torch_dist (--ckpt-format torch_dist), this rank's part
  // of the model as the plan says (every rank writes its items into __<world rank>_0.distcp, rank 0
  // the metadata and common state); no shard folders, and no optimizer or RNG state yet.
  std::shared_ptr<const TorchDistPlan> torch_dist;
};

// "<root>/iter_0000100".
std::string iteration_folder(const std::string& root, std::int64_t iteration);

// Collective over the world of `pc` (every rank calls it with its part): writes the checkpoint of
// `state.iteration` and then the tracker. Throws megatron::Error on every rank when any rank
// could not write (naming the failed ranks; the failing rank's own message first); nothing
// half-written is left under a final name.
void save_checkpoint(const std::string& root, const CheckpointState& state, const ShardWriter& writer,
                     const parallel::ParallelContext& pc);
// One process, one shard ("mp_rank_00").
void save_checkpoint(const std::string& root, const CheckpointState& state, const std::string& shard);

// One process writes a whole model-only checkpoint (converters): every shard folder's
// model.safetensors and meta.json (counters and config from `common`, no optimizer or RNG state)
// into iter_XXXXXXX.tmp.<pid>/, renamed into place, then the tracker. `root` must be new or empty
// (the temporaries of killed converters aside, which are removed); it is locked while written, so
// a training run saving there, or another converter, is refused by name. `ep`: the shards' expert-
// parallel size (their names mp_rank_TT[_PPP]_EEE), recorded in meta.json.
void save_model_shards(const std::string& root, const CheckpointState& common,
                       const std::vector<std::pair<std::string, NamedTensors>>& shards, int ep = 1);

// What save_model_shards does around the files: `fill` writes the checkpoint's files into the
// temporary folder it is given (the tokenizer's copies are added after), which is then renamed into
// place, then the tracker.
void write_new_checkpoint(const std::string& root, const CheckpointState& common,
                          const std::function<void(const std::string& folder)>& fill);

// Creates <root> and locks <root>/.lock against a second run saving there (held until the
// returned lock is destroyed or the process ends); throws naming the process holding it.
std::unique_ptr<OutputLock> lock_save_folder(const std::string& root);

// True for the names a save writes into <root>: iter_XXXXXXX, the tracker and the run config.
bool is_checkpoint_output(std::string_view name);

// At start, with the --save lock held: removes <root>'s temporaries (iter_XXXXXXX.tmp.<pid>/,
// tracker and run-config .tmp files) left by saves that were killed. `locked`: the lock really
// locks (lock_save_folder's note() is empty), so every temporary there is stale, whichever node
// its pid came from; otherwise only those whose process is gone from this node. Returns their paths.
std::vector<std::string> remove_stale_temporaries(const std::string& root, bool locked = false);

// The iterations of the complete checkpoint folders in <root> (iter_XXXXXXX, no temporaries),
// ascending; empty when <root> does not exist.
std::vector<std::int64_t> saved_iterations(const std::string& root);

// `iterations` for a message: "10, 20, 30", the middle elided past eight ("1, 2, ..., (5 more), 12").
std::string describe_iterations(const std::vector<std::int64_t>& iterations);

// The iteration in <root>/latest_checkpointed_iteration.txt; nullopt when the file does not exist
// (no checkpoint yet). Throws when it exists but is not a non-negative integer.
std::optional<std::int64_t> read_tracker(const std::string& root);

// The parallel layout a checkpoint was saved with. A torch_dist checkpoint's from Megatron's args
// (read_torch_dist_run). This build's own: PP from its mp_rank_TT[_PPP][_EEE] folders; TP
// (the folders' count when not recorded), the experts' TP and EP sizes, DP and the optimizer kind
// from the first shard's meta.json. With an expert TP size other than TP there are max(TP, ETP)
// folders per stage and EP rank (ParallelState::checkpoint_shard_index). Throws, naming the folder, when it
// does not exist (blaming the tracker), has no shard folders, or its first shard has no meta.json.
enum class CheckpointFormat {
  kNative,     // this build's safetensors shards (mp_rank_*/meta.json)
  kTorchDist,  // Megatron-Core's distributed checkpoint (torch_dist.h)
};
struct SavedLayout {
  CheckpointFormat format = CheckpointFormat::kNative;
  int tp = 1;
  int pp = 1;
  int ep = 1;  // expert_model_parallel_size in the first shard's meta.json (1 when absent)
  int etp = 1;  // expert_tensor_parallel_size there (tp when absent)
  int dp = 1;
  bool distributed_optimizer = false;
  nlohmann::json config;  // the run configuration it was saved with (empty if unknown)
};
SavedLayout read_layout(const std::string& root, std::int64_t iteration);

// Reads and verifies (sizes, CRC-32) one shard of a checkpoint. The optimizer and RNG states are
// read only when asked for; asking for an optimizer state that was not saved is an error. The
// optimizer state comes in `optimizer_parts` (every file of the shard) and, when the shard has a
// single optimizer file, also in `optimizer`.
// `optimizer_filter`, when given, chooses the optimizer tensors to read (Optimizer::
// needs_state_piece: a rank of the distributed optimizer reads only the pieces it owns, so a resume
// holds 1/DP of the shard's optimizer state per rank, not all of it); every file is still verified.
// `load_model` false: the model file is not read (only counters, config and what else is asked for).
CheckpointState load_checkpoint(const std::string& root, std::int64_t iteration, const std::string& shard,
                                bool load_optimizer, bool load_rng, const TensorFilter& optimizer_filter = {},
                                bool load_model = true);

}  // namespace megatron::checkpoint
