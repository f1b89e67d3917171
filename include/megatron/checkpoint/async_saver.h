// --async-save: training goes on while a checkpoint is written. start() copies the state's
// tensors into host memory (a snapshot: pinned memory and one stream sync for CUDA tensors, a
// copy for CPU ones), creates the temporary folder with the others (collective) and writes this
// rank's files on a thread of its own; no communication happens off the main thread. poll(),
// called by every rank at the same point of each iteration, asks all ranks whether their writes
// are durable (one all-reduce) and, once they all are, commits exactly as a synchronous save does
// (meta.json, rename, tracker last). So the tracker only moves when every rank's files are on
// disk, a kill at any moment leaves the previous checkpoint in place and the tracker behind, and a
// failed write is reported, on every rank, by the poll that finds it. One snapshot at most is in
// flight: start() first finishes the previous save, which bounds host memory to one checkpoint
// (this rank's part). The snapshot's buffers are kept and refilled by the next save, whose stall
// is then one memory copy (fresh memory's page faults cost more than the copy).
#pragma once

#include <system_error>
#include <filesystem>
#include <functional>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>

#include "megatron/checkpoint/checkpoint.h"

namespace megatron::checkpoint {

namespace detail {
struct SaveInProgress;
}

class AsyncCheckpointSaver {
 public:
  explicit AsyncCheckpointSaver(const parallel::ParallelContext& pc);
  // Waits for a write in flight; a save not yet committed is abandoned (rank 0 removes its
  // temporary folder), as after a crash: the previous checkpoint and the tracker stay.
  ~AsyncCheckpointSaver();
  AsyncCheckpointSaver(const AsyncCheckpointSaver&) = delete;
  AsyncCheckpointSaver& operator=(const AsyncCheckpointSaver&) = delete;

  // Collective. Finishes (and commits) the save in flight, if any, then snapshots `state` and
  // starts writing it. Returns the iteration of a save this call committed, if it did.
  std::optional<std::int64_t> start(const std::string& root, const CheckpointState& state, const ShardWriter& writer);
  // Collective (every rank, same point). When every rank's write is done, commits the save and
  // returns its iteration; else nullopt at once, or with `blocking` after waiting. Throws on every
  // rank when any rank failed to write (the save is then dropped and the previous one stays).
  std::optional<std::int64_t> poll(bool blocking);
  // The iteration being written, if any.
  std::optional<std::int64_t> in_flight() const;

 private:
  const parallel::ParallelContext& pc_;
  std::unique_ptr<detail::SaveInProgress> save_;
  std::shared_ptr<CheckpointState> snapshot_;  // kept for reuse after its save is committed
  std::future<void> writing_;
};

// Megatron's --save-retain-interval and our --keep-last-checkpoints, applied on one rank after a
// save of `latest` was committed (the tracker already names it): removes each older
// <root>/iter_XXXXXXX/ that is neither among the newest `keep_last` (latest counted; 1 when only a
// retain interval is given, as Megatron deletes the previous checkpoint) nor a multiple of
// `retain_interval`. Each goes by a rename to a temporary name first, so that a kill mid-removal
// leaves no partial checkpoint under a final name. Returns the removed folders, oldest first.
struct RetentionPolicy {
  std::optional<std::int64_t> retain_interval;  // --save-retain-interval
  std::optional<std::int64_t> keep_last;        // --keep-last-checkpoints
  bool active() const { return retain_interval.has_value() || keep_last.has_value(); }
};
// A folder that cannot be removed goes back under its final name (never left under a temporary
// name the next start would take for a killed save's leftover) and is reported by a throw.
// `remove_folder` removes a folder tree (std::filesystem::remove_all; tests pass a failing one).
using RemoveFolder = std::function<void(const std::filesystem::path&, std::error_code&)>;
std::vector<std::string> apply_retention(const std::string& root, std::int64_t latest, const RetentionPolicy& policy,
                                         const RemoveFolder& remove_folder = {});
// Removes <root>/iter_XXXXXXX/ the same way (renamed first; put back and thrown on failure, the
// message starting with `purpose`); returns the folder's path.
std::string remove_checkpoint(const std::string& root, std::int64_t iteration, const std::string& purpose,
                              const RemoveFolder& remove_folder = {});

}  // namespace megatron::checkpoint
