// AsyncCheckpointSaver and checkpoint retention (see async_saver.h).
#include "megatron/checkpoint/async_saver.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "megatron/core/check.h"
#include "save_phases.h"

namespace megatron::checkpoint {
namespace {

namespace fs = std::filesystem;

// Host copies of `tensors` into `out`, reusing its buffers where the previous snapshot had the
// same tensor (name, shape, type): fresh memory costs page faults that take longer than the copy
// itself. Device tensors go to pinned memory without blocking (the caller synchronises once).
void snapshot(const NamedTensors& tensors, NamedTensors& out, bool& any_device) {
  const bool reuse = out.size() == tensors.size() &&
                     std::equal(tensors.begin(), tensors.end(), out.begin(), [](const auto& a, const auto& b) {
                       return a.first == b.first && a.second.sizes().equals(b.second.sizes()) &&
                              a.second.scalar_type() == b.second.scalar_type();
                     });
  if (!reuse) out.clear();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    const bool device = !t.device().is_cpu();
    any_device = any_device || device;
    if (!reuse) {
      out.emplace_back(name, at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(device)));
    }
    out[i].second.copy_(t.detach(), /*non_blocking=*/device);
  }
}

}  // namespace

AsyncCheckpointSaver::AsyncCheckpointSaver(const parallel::ParallelContext& pc) : pc_(pc) {}

AsyncCheckpointSaver::~AsyncCheckpointSaver() {
  if (writing_.valid()) writing_.wait();
}

std::optional<std::int64_t> AsyncCheckpointSaver::in_flight() const {
  if (!save_) return std::nullopt;
  return save_->iteration;
}

std::optional<std::int64_t> AsyncCheckpointSaver::start(const std::string& root, const CheckpointState& state,
                                                        const ShardWriter& writer) {
  const std::optional<std::int64_t> committed = poll(/*blocking=*/true);
  // The previous snapshot's buffers are free again (its write finished): refill them.
  std::shared_ptr<CheckpointState> snap = snapshot_ ? snapshot_ : std::make_shared<CheckpointState>();
  std::string error;
  try {  // host memory may run out here, on one rank: all of them must learn it, below
    snap->iteration = state.iteration;
    snap->tokenizer_files = state.tokenizer_files;  // shared, never changed
    bool any_device = false;
    snapshot(state.model, snap->model, any_device);
    snapshot(state.optimizer, snap->optimizer, any_device);
    snapshot(state.rng, snap->rng, any_device);
    if (any_device) {
      // The copies above are queued on the current streams of their devices; wait for all of them.
      // One element read back on the same stream is ordered after them (a full reduction would
      // cost a pass over the tensor).
      bool synced = false;
      for (const auto* group : {&state.model, &state.optimizer, &state.rng}) {
        for (const auto& [name, t] : *group) {
          if (!synced && !t.device().is_cpu() && t.numel() > 0) {
            (void)t.reshape({-1}).narrow(0, 0, 1).item();
            synced = true;
          }
        }
      }
    }
  } catch (const std::exception& e) {
    error = e.what();
    snapshot_.reset();  // half filled: the next save starts afresh
  }
  at::Tensor failed = at::full({1}, error.empty() ? 0 : 1, at::kInt);
  pc_.comm->all_reduce(failed, parallel::ReduceOp::kMax, *pc_.world).wait();
  if (!error.empty()) {
    MEGATRON_FAIL("checkpoint save at iteration ", state.iteration, ": cannot copy the state to host memory (", error,
                  ")");
  }
  MEGATRON_CHECK(failed.item<int>() == 0, "checkpoint save at iteration ", state.iteration,
                 " failed on another rank (its message is above); the previous checkpoint stays");
  save_ = std::make_unique<detail::SaveInProgress>(detail::begin_save(root, state, writer, pc_));
  snapshot_ = std::move(snap);
  writing_ = std::async(std::launch::async, [save = save_.get(), snap = snapshot_] { detail::write_files(*save, *snap); });
  return committed;
}

std::optional<std::int64_t> AsyncCheckpointSaver::poll(bool blocking) {
  if (!save_) return std::nullopt;  // the same on every rank: saves start collectively
  if (blocking) writing_.wait();
  const bool done = writing_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  at::Tensor busy = at::full({1}, done ? 0 : 1, at::kInt);
  pc_.comm->all_reduce(busy, parallel::ReduceOp::kMax, *pc_.world).wait();
  if (busy.item<int>() != 0) return std::nullopt;
  writing_.get();
  std::unique_ptr<detail::SaveInProgress> save = std::move(save_);
  const std::int64_t iteration = save->iteration;
  detail::commit_save(*save, pc_);  // throws on every rank when any rank failed
  return iteration;
}

std::string remove_checkpoint(const std::string& root, std::int64_t iteration, const std::string& purpose,
                              const RemoveFolder& remove_folder) {
  const std::string folder = iteration_folder(root, iteration);
  // Out of the final name first: a kill from here on leaves a temporary, removed at next start.
  const std::string doomed = folder + ".tmp." + std::to_string(::getpid());
  std::error_code ec;
  fs::rename(folder, doomed, ec);
  MEGATRON_CHECK(!ec, purpose, ": cannot rename ", folder, " for removal (", ec.message(), ")");
  if (remove_folder) {
    remove_folder(doomed, ec);
  } else {
    fs::remove_all(doomed, ec);
  }
  if (ec) {
    // Back under its final name, whole or not: a temporary name would make the next start take
    // it for a killed save's leftover.
    std::error_code back;
    fs::rename(doomed, folder, back);
    MEGATRON_FAIL(purpose, ": cannot remove ", folder, " (", ec.message(), ")",
                  back ? str_cat("; it is left as ", doomed, ", which the next start removes")
                       : std::string("; it stays, possibly without some of its files"));
  }
  return folder;
}

std::vector<std::string> apply_retention(const std::string& root, std::int64_t latest, const RetentionPolicy& policy,
                                         const RemoveFolder& remove_folder) {
  if (!policy.active()) return {};
  const std::int64_t keep_last = std::max<std::int64_t>(1, policy.keep_last.value_or(1));
  std::vector<std::int64_t> iterations = saved_iterations(root);
  std::erase_if(iterations, [&](std::int64_t it) { return it > latest; });
  std::vector<std::string> removed;
  const std::size_t newest = iterations.size() > static_cast<std::size_t>(keep_last)
                                 ? iterations.size() - static_cast<std::size_t>(keep_last)
                                 : 0;
  for (std::size_t i = 0; i < newest; ++i) {
    const std::int64_t it = iterations[i];
    if (it == latest) continue;
    if (policy.retain_interval && *policy.retain_interval > 0 && it % *policy.retain_interval == 0) continue;
    removed.push_back(remove_checkpoint(root, it, "checkpoint retention", remove_folder));
  }
  return removed;
}

}  // namespace megatron::checkpoint
