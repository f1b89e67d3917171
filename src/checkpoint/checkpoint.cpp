// Checkpoint layout and commit protocol (see checkpoint.h).
#include "megatron/checkpoint/checkpoint.h"

#include <fcntl.h>  // AT_FDCWD
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include "megatron/checkpoint/shard_name.h"
#include "megatron/checkpoint/torch_dist.h"
#include "megatron/core/strings.h"
#include "megatron/core/check.h"
#include "megatron/core/file_io.h"
#include "checkpoint_files.h"
#include "save_phases.h"

namespace megatron::checkpoint {
namespace {

namespace fs = std::filesystem;
using namespace detail;  // the file names


void write_text_atomically(const std::string& path, const std::string& text) {
  AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

nlohmann::json digest_json(const FileDigest& d) { return {{"size", d.size}, {"crc32", d.crc32}}; }

}  // namespace

std::string iteration_folder(const std::string& root, std::int64_t iteration) {
  char name[32];
  std::snprintf(name, sizeof(name), "iter_%07lld", static_cast<long long>(iteration));
  return (fs::path(root) / name).string();
}

namespace {

std::string optimizer_file_name(const ShardWriter& w) {
  if (!w.distributed_optimizer) return kOptimizerFile;
  char name[64];
  std::snprintf(name, sizeof(name), "distrib_optim.dp_rank_%03d.safetensors", w.dp_rank);
  return name;
}

// Renames the complete folder `from` to `to`. A `to` that exists (a re-save of an iteration) is
// swapped with it in one step (renameat2 RENAME_EXCHANGE), so the name never stands empty, and
// the old contents, now under `from`, are removed after; a file system without the exchange
// gets remove-then-rename.
void publish_folder(const std::string& from, const std::string& to) {
  if (!fs::exists(to)) {
    fs::rename(from, to);
    return;
  }
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(from);
    return;
  }
  fs::remove_all(to);
  fs::rename(from, to);
}

}  // namespace

namespace detail {

std::vector<std::int64_t> all_gather_values(const std::vector<std::int64_t>& mine, const parallel::ProcessGroup& group,
                                            parallel::Communicator& comm) {
  at::Tensor in = at::tensor(mine, at::kLong);
  at::Tensor out = at::empty({static_cast<std::int64_t>(mine.size()) * group.size()}, at::kLong);
  comm.all_gather(out, in, group).wait();
  return std::vector<std::int64_t>(out.data_ptr<std::int64_t>(), out.data_ptr<std::int64_t>() + out.numel());
}

void write_tokenizer_files(const std::string& iteration_dir, const CheckpointState& state) {
  if (!state.tokenizer_files || state.tokenizer_files->empty()) return;
  const fs::path dir = fs::path(iteration_dir) / kTokenizerFolder;
  std::error_code ec;
  fs::create_directories(dir, ec);
  MEGATRON_CHECK(!ec, "cannot create ", dir.string(), " (", ec.message(), ")");
  for (const auto& [name, bytes] : *state.tokenizer_files) write_text_atomically((dir / name).string(), bytes);
  fsync_folder(dir.string());
}

SaveInProgress begin_save(const std::string& root, const CheckpointState& state, const ShardWriter& writer,
                          const parallel::ParallelContext& pc) {
  parallel::Communicator& comm = *pc.comm;
  const parallel::ProcessGroup& world = *pc.world;
  const bool leader = world.rank() == 0;
  SaveInProgress save;
  save.root = root;
  save.iteration = state.iteration;
  save.writer = writer;
  save.leader = leader;
  save.world_rank = world.rank();
  save.final_dir = iteration_folder(root, state.iteration);
  // Rank 0 names and creates the temporary folder; the others learn its pid.
  std::string error;
  at::Tensor pid = at::tensor({static_cast<std::int64_t>(::getpid()), std::int64_t{0}}, at::kLong);
  if (leader) {
    try {
      std::error_code ec;
      fs::create_directories(root, ec);
      MEGATRON_CHECK(!ec, "--save ", root, ": cannot create the folder (", ec.message(), ")");
      const std::string path = save.final_dir + ".tmp." + std::to_string(::getpid());
      fs::remove_all(path, ec);
      // Removed on an error here and by the signal handler on SIGINT/SIGTERM/SIGHUP.
      save.temp = std::make_unique<TemporaryFolder>(path);
    } catch (const std::exception& e) {  // every rank must reach the broadcast below
      error = e.what();
      pid[1] = 1;
    }
  }
  comm.broadcast(pid, 0, world).wait();
  MEGATRON_CHECK(pid[1].item<std::int64_t>() == 0 || leader, "checkpoint save at iteration ", state.iteration,
                 " failed on rank 0 (its message is above); the previous checkpoint stays");
  if (!error.empty()) MEGATRON_FAIL(error);
  save.temp_dir = save.final_dir + ".tmp." + std::to_string(pid[0].item<std::int64_t>());
  save.writes_optimizer = !state.optimizer.empty() && (writer.distributed_optimizer || writer.model);
  save.meta = meta_without_files(state, writer);
  return save;
}

nlohmann::json meta_without_files(const CheckpointState& state, const ShardWriter& writer) {
  nlohmann::json meta = {{"format", "megatron-cpp"},
          {"format_version", kFormatVersion},
          {"iteration", state.iteration},
          {"consumed_train_samples", state.consumed_train_samples},
          {"consumed_valid_samples", state.consumed_valid_samples},
          {"scheduler_num_steps", state.scheduler_num_steps},
          {"optimizer_steps", state.optimizer_steps},
          {"floating_point_operations_so_far", state.floating_point_operations_so_far},
          {"data_parallel_size", writer.dp_size},
          {"expert_model_parallel_size", writer.ep},
          {"distributed_optimizer", writer.distributed_optimizer},
          {"opt_param_scheduler", state.scheduler},
          {"config", state.config},
          {"grad_scaler", state.grad_scaler}};
  if (writer.tp > 0) meta["tensor_model_parallel_size"] = writer.tp;
  if (writer.etp > 0) meta["expert_tensor_parallel_size"] = writer.etp;
  return meta;
}

void write_files(SaveInProgress& save, const CheckpointState& state) noexcept {
  const fs::path dir = fs::path(save.temp_dir) / save.writer.shard;
  try {
    if (save.leader) write_tokenizer_files(save.temp_dir, state);
    if (save.writer.torch_dist) {
      // Every rank's file goes straight into the folder rank 0 made (no shard folder to create here).
      MEGATRON_CHECK(fs::is_directory(save.temp_dir), "checkpoint save at iteration ", save.iteration, ": ",
                     save.temp_dir, ", made by rank 0, is not there as rank ", save.world_rank,
                     " sees it; --save must be a folder every rank sees (a shared file system)");
      save.torch_dist_entries = write_torch_dist_shard(save.temp_dir, str_cat("__", save.world_rank, "_0.distcp"),
                                                       state.model, *save.writer.torch_dist);
      return;
    }
    std::error_code ec;
    fs::create_directories(dir, ec);
    MEGATRON_CHECK(!ec, "cannot create ", dir.string(), " (", ec.message(), ")");
    if (save.writer.model) {
      save.files[kModelFile] = digest_json(write_safetensors((dir / kModelFile).string(), state.model));
      if (!state.rng.empty()) {
        save.files[kRngFile] = digest_json(write_safetensors((dir / kRngFile).string(), state.rng));
      }
    }
    if (save.writes_optimizer) {
      save.optimizer_digest = write_safetensors((dir / optimizer_file_name(save.writer)).string(), state.optimizer);
    }
  } catch (const Error& e) {
    save.error = e.what();
  } catch (const std::exception& e) {
    save.error = str_cat("cannot write checkpoint files into ", dir.string(), ": ", e.what());
  }
}

namespace {

// The model writer's meta.json: its files' digests and those of the optimizer files its group
// wrote (`digests`: per group rank, whether it wrote one, its size, its CRC-32), each checked to be
// in the folder as this rank sees it.
void write_shard_meta(const SaveInProgress& save, const parallel::ProcessGroup& writers,
                      const std::vector<std::int64_t>& digests, const parallel::ProcessGroup& world) {
  const ShardWriter& writer = save.writer;
  const fs::path dir = fs::path(save.temp_dir) / writer.shard;
  nlohmann::json files = save.files;
  for (int r = 0; r < writers.size(); ++r) {
    if (digests[3 * r] == 0) continue;
    ShardWriter other = writer;
    other.dp_rank = r;
    const std::string name = optimizer_file_name(other);
    // A peer on another node wrote it into its own view of the folder: it must be here too.
    std::error_code ec;
    const auto size = fs::file_size(dir / name, ec);
    MEGATRON_CHECK(!ec && size == static_cast<std::uintmax_t>(digests[3 * r + 1]), "checkpoint save at iteration ",
                   save.iteration, ": ", writer.shard, "/", name, ", written by rank ",
                   writers.ranks()[static_cast<std::size_t>(r)], ", is not in ", dir.string(), " as rank ",
                   world.ranks()[static_cast<std::size_t>(world.rank())],
                   " sees it; --save must be a folder every rank sees (a shared file system)");
    files[name] = {{"size", digests[3 * r + 1]}, {"crc32", digests[3 * r + 2]}};
  }
  nlohmann::json meta = save.meta;
  meta["files"] = files;
  write_text_atomically((dir / kMetaFile).string(), meta.dump(2) + "\n");
}

// Rank 0, once every rank wrote its part: every shard folder there, the folder renamed into
// place, then the tracker.
void publish_save(SaveInProgress& save, const parallel::ParallelState& ps) {
  // Every model-parallel shard must be in the folder this rank renames (a shared --save); a
  // torch_dist save checked its files when it wrote the metadata.
  for (const std::string& shard : save.writer.torch_dist ? std::vector<std::string>{} : ShardName::all(ps)) {
    MEGATRON_CHECK(fs::exists(fs::path(save.temp_dir) / shard / kMetaFile), "checkpoint save at iteration ",
                   save.iteration, ": ", shard, "/", kMetaFile, ", written by another rank, is not in ", save.temp_dir,
                   " as rank 0 sees it; --save must be a folder every rank sees (a shared file system)");
  }
  fsync_folder(save.temp_dir);  // the shard folders' entries
  // Out of the signal handler's reach before the rename: a signal from here on leaves the
  // temporary (removed at the next start) rather than a handler emptying the folder as it
  // becomes final.
  save.temp->release();
  publish_folder(save.temp_dir, save.final_dir);
  fsync_parent_folder(save.final_dir);
  // The tracker moves last, and not at all once a signal's cleanup has begun (it may have been
  // removing this folder's files since before the release).
  MEGATRON_CHECK(!megatron::detail::signal_cleanup_started(), "a signal arrived while checkpoint ", save.final_dir,
                 " was committed; the tracker stays at the previous checkpoint");
  write_text_atomically((fs::path(save.root) / kTrackerFile).string(), std::to_string(save.iteration));
}

}  // namespace

void commit_save(SaveInProgress& save, const parallel::ParallelContext& pc) {
  parallel::Communicator& comm = *pc.comm;
  const parallel::ProcessGroup& world = *pc.world;
  const bool leader = world.rank() == 0;
  const ShardWriter& writer = save.writer;
  std::string error = save.error;

  if (writer.torch_dist) {
    error = commit_torch_dist_metadata(save, pc);
  } else {
    // The model writer of each shard collects the optimizer files' digests of its DP x CP group (the
    // distributed optimizer's shards).
    const parallel::ProcessGroup& writers = writer.group != nullptr ? *writer.group : *pc.dp_cp;
    const auto digests = all_gather_values({save.writes_optimizer ? 1 : 0,
                                            static_cast<std::int64_t>(save.optimizer_digest.size),
                                            save.optimizer_digest.crc32},
                                           writers, comm);
    if (writer.model && error.empty()) {
      try {
        write_shard_meta(save, writers, digests, world);
      } catch (const std::exception& e) {  // not only ours: every rank must reach the all-gather below
        error = e.what();
      }
    }
  }

  // Commit only when every rank wrote everything.
  const auto failed = all_gather_values({error.empty() ? 0 : 1}, world, comm);
  std::string failed_ranks;
  for (std::size_t r = 0; r < failed.size(); ++r) {
    if (failed[r] != 0) failed_ranks += (failed_ranks.empty() ? "" : ", ") + std::to_string(world.ranks()[r]);
  }
  if (!failed_ranks.empty()) {
    save.temp.reset();  // rank 0 removes the partial folder
    if (!error.empty()) MEGATRON_FAIL(error);
    MEGATRON_FAIL("checkpoint save at iteration ", save.iteration, " failed on rank(s) ", failed_ranks,
                  " (their messages are above); the previous checkpoint stays");
  }
  if (leader) {
    try {
      publish_save(save, *pc.state);
    } catch (const std::exception& e) {
      error = str_cat("cannot commit checkpoint ", save.final_dir, ": ", e.what());
      std::error_code ec;
      if (fs::exists(save.temp_dir, ec)) fs::remove_all(save.temp_dir, ec);  // released: ours to remove
    }
  }
  at::Tensor committed = at::tensor({error.empty() ? std::int64_t{1} : std::int64_t{0}}, at::kLong);
  comm.broadcast(committed, 0, world).wait();
  if (!error.empty()) MEGATRON_FAIL(error);
  MEGATRON_CHECK(committed.item<std::int64_t>() == 1, "checkpoint save at iteration ", save.iteration,
                 " could not be committed by rank 0 (its message is above)");
}

}  // namespace detail

void save_checkpoint(const std::string& root, const CheckpointState& state, const ShardWriter& writer,
                     const parallel::ParallelContext& pc) {
  detail::SaveInProgress save = detail::begin_save(root, state, writer, pc);
  detail::write_files(save, state);
  detail::commit_save(save, pc);
}

void write_new_checkpoint(const std::string& root, const CheckpointState& common,
                          const std::function<void(const std::string& folder)>& fill) {
  // The folder is this converter's alone while it writes: a training run saving there (or another
  // converter) holds its lock; what killed converters left behind goes first.
  const auto lock = lock_save_folder(root);
  remove_stale_temporaries(root, lock->note().empty());
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    MEGATRON_CHECK(it->path().filename() == ".lock", root, " is not empty (it holds ", it->path().filename().string(),
                   "); write the checkpoint into a new folder");
  }
  MEGATRON_CHECK(!ec, root, ": cannot list the folder (", ec.message(), ")");
  const std::string final_dir = iteration_folder(root, common.iteration);
  TemporaryFolder temp(final_dir + ".tmp." + std::to_string(::getpid()));
  fill(temp.path());
  detail::write_tokenizer_files(temp.path(), common);
  fsync_folder(temp.path());
  temp.release();  // as in commit_save: out of the signal handler's reach before the rename
  fs::rename(temp.path(), final_dir);
  fsync_parent_folder(final_dir);
  MEGATRON_CHECK(!megatron::detail::signal_cleanup_started(), "a signal arrived while ", final_dir,
                 " was committed; no tracker was written");
  write_text_atomically((fs::path(root) / kTrackerFile).string(), std::to_string(common.iteration));
}

void save_model_shards(const std::string& root, const CheckpointState& common,
                       const std::vector<std::pair<std::string, NamedTensors>>& shards, int ep) {
  write_new_checkpoint(root, common, [&](const std::string& folder) {
    for (const auto& [shard, tensors] : shards) {
      const fs::path dir = fs::path(folder) / shard;
      fs::create_directories(dir);
      ShardWriter writer;
      writer.shard = shard;
      writer.ep = ep;
      nlohmann::json meta = detail::meta_without_files(common, writer);
      meta["files"] = {{kModelFile, digest_json(write_safetensors((dir / kModelFile).string(), tensors))}};
      write_text_atomically((dir / kMetaFile).string(), meta.dump(2) + "\n");
    }
  });
}

void save_checkpoint(const std::string& root, const CheckpointState& state, const std::string& shard) {
  const auto comm = parallel::make_single_process_communicator();
  const parallel::ParallelState ps(parallel::ParallelConfig{}, 0);
  const auto pc = parallel::ParallelContext::create(ps, *comm);
  ShardWriter writer;
  writer.shard = shard;
  save_checkpoint(root, state, writer, pc);
}

std::unique_ptr<OutputLock> lock_save_folder(const std::string& root) {
  std::error_code ec;
  fs::create_directories(root, ec);
  MEGATRON_CHECK(!ec, "--save ", root, ": cannot create the folder (", ec.message(), ")");
  return std::make_unique<OutputLock>((fs::path(root) / ".lock").string(), "--save " + root);
}

bool is_checkpoint_output(std::string_view name) {
  if (name == kTrackerFile || name == kRunConfigFile) return true;
  // iter_%07d: seven digits, more from iteration 10,000,000 on.
  if (name.size() < 12 || name.size() > 24 || name.substr(0, 5) != "iter_") return false;
  for (char c : name.substr(5)) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::vector<std::string> remove_stale_temporaries(const std::string& root, bool locked) {
  return megatron::remove_stale_temporaries(root, is_checkpoint_output, locked);
}

}  // namespace megatron::checkpoint
