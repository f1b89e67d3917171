// A run's checkpoints (DESIGN 5.1), the only reader of the checkpoint plan: at start rank 0 locks
// the --save folder and removes the temporaries of saves that were killed; a save gathers the
// run's state (counters, scheduler, optimizer, RNG, model, the saved-run record, the tokenizer's
// files) and writes every rank's unique part, synchronously or with --async-save (a host snapshot
// written while training goes on, committed at a later poll once every rank wrote it); after a
// commit, Megatron's success line and then retention (rank 0). On --load: the tracker's
// iteration, the layout it was saved in (resharded on the fly when TP or the layer split differ),
// a checkpoint of another model refused naming every difference, and the state restored as
// --finetune, --no-load-optim and --no-load-rng say.
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "megatron/checkpoint/async_saver.h"
#include "megatron/checkpoint/checkpoint.h"
#include "megatron/checkpoint/reshard.h"
#include "megatron/core/log.h"
#include "megatron/core/process_lock.h"
#include "megatron/model/model_config.h"
#include "megatron/optim/optimizer.h"
#include "megatron/optim/param_scheduler.h"
#include "megatron/parallel/parallel_context.h"
#include "megatron/parallel/pipeline_layout.h"
#include "megatron/train/run_plan.h"
#include "megatron/train/train_state.h"

namespace megatron::train {

// Rank 0's first step with --save, before any other work: locks the folder (throws naming the run
// that holds it) and removes the temporaries of killed saves, saying so on `out`. The run's form
// returns null on other ranks and without --save.
std::unique_ptr<OutputLock> take_save_folder(const std::string& save, std::ostream& out);
std::unique_ptr<OutputLock> take_save_folder(const RunPlan& plan, int rank, std::ostream& out);

// What a checkpoint saves and restores of a run, owned by the trainer.
struct RunStateRefs {
  TrainState& counters;
  optim::Optimizer& optimizer;
  optim::ParamScheduler& scheduler;
  at::Generator& default_gen;
  at::Generator& model_parallel_gen;
  const parallel::NamedTensors& model;  // the parameters and persistent buffers, by checkpoint name
  const std::vector<parallel::TensorParallelLayout>& layouts;  // model's TP layouts
  const parallel::PipelineLayout& layout;                      // the layer split
};

class Checkpointer {
 public:
  // `out`: rank 0's stream (Megatron's print_rank_0); other ranks pass a discarding one.
  // `save_lock`: take_save_folder's lock on rank 0 with --save (held as long as the checkpointer).
  Checkpointer(const CheckpointPlan& plan, const parallel::ParallelContext& pc, bool distributed_optimizer,
               std::ostream& out, std::unique_ptr<OutputLock> save_lock);
  // A run's: its checkpoint plan and optimizer kind.
  Checkpointer(const RunPlan& plan, const parallel::ParallelContext& pc, std::ostream& out,
               std::unique_ptr<OutputLock> save_lock)
      : Checkpointer(plan.checkpoint, pc, plan.ddp.use_distributed_optimizer, out, std::move(save_lock)) {}
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  bool saves() const { return plan_.save.has_value(); }
  // Whether --save-interval asks for a checkpoint after `iteration`.
  bool due(std::int64_t iteration) const { return plan_.save_interval && iteration % *plan_.save_interval == 0; }
  // Called after each commit, before the success line (TensorBoard flushes its events there).
  void on_commit(std::function<void()> callback) { on_commit_ = std::move(callback); }
  // The tokenizer whose files every checkpoint carries (rank 0 of a run that saves them reads
  // them now, once).
  void carry_tokenizer(const tokenizer::TokenizerOptions& tokenizer);
  // <save>/run_config.json (rank 0), written atomically.
  void write_run_config(const nlohmann::json& config) const;

  // Collective: saves the run's state at its iteration (the saved-run record `run_config`) to
  // --save; with --async-save it returns once the host snapshot is taken.
  void save(const RunStateRefs& run, const nlohmann::json& run_config);
  // The same for a state already gathered; `torch_dist`: what this rank writes of it with
  // --ckpt-format torch_dist (required then).
  void save(const checkpoint::CheckpointState& state,
            std::shared_ptr<const checkpoint::TorchDistPlan> torch_dist = nullptr);
  // Collective, at the same point on every rank: commits an async save whose writes are all done
  // (`blocking`: waits for them). No-op without a save in flight.
  void poll(bool blocking);

  // What --load loads into: this rank's parameters (their checkpoint names and TP layouts), the
  // current layer split, the run's model, and the optimizer's choice of state pieces.
  struct LoadTarget {
    const parallel::NamedTensors& params;
    const std::vector<parallel::TensorParallelLayout>& layouts;
    const parallel::PipelineLayout& layout;
    const model::ModelConfig& model;
    const tokenizer::TokenizerOptions& tokenizer;  // this run's, against the one the checkpoint records
    checkpoint::TensorFilter optimizer_pieces;
    std::size_t buffers = 0;  // the last `buffers` of params are buffers (no optimizer state)
  };
  // Collective. Loads the --load checkpoint's parameters into `target.params` and restores `run`:
  // its counters, scheduler and RNG unless --finetune, its optimizer state unless --finetune or
  // --no-load-optim (and, of the loss scaler, its state). Nothing without --load, or when the
  // folder has no tracker (Megatron's warning, then a fresh start).
  void restore(const LoadTarget& target, const RunStateRefs& run) const;
  // The --load checkpoint's state, its parameters already in `target.params` (restore's first
  // half); nullopt without --load or a tracker.
  std::optional<checkpoint::CheckpointState> load(const LoadTarget& target) const;
  // The loaded checkpoint's own vocabulary rows past its tokenizer (an imported model's), which
  // this run's checkpoints record in turn; none before a load or when it records none.
  std::optional<std::int64_t> model_vocab_rows() const { return model_vocab_rows_; }
  // Every rank, after restore() and before the first save: a --save folder holding checkpoints this
  // run did not resume from (no --load of it) is another run's. Their model differing from
  // `model` is refused, naming the differences; the same model gets a warning naming the
  // iterations there, which this run's first committed save (from `start_iteration` on) removes,
  // so that no checkpoint of the other run stays beside this run's tracker.
  void check_save_folder(const model::ModelConfig& model, std::int64_t start_iteration);

 private:
  void committed(std::int64_t iteration);
  void remove_other_runs(std::int64_t saved);
  // The distributed optimizer's state in the same layout: the pieces this rank owns that other
  // folders of its stage hold (other EP ranks' for dense parameters, other TP ranks' where the
  // experts' TP size is not TP), into state.optimizer_parts.
  void add_sibling_optimizer_pieces(const LoadTarget& target, std::int64_t iteration,
                                    checkpoint::CheckpointState& state) const;
  // What this rank holds, for the readers of other layouts and formats (and the torch_dist writer).
  checkpoint::ReshardTarget rank_target(const parallel::NamedTensors& params,
                                        const std::vector<parallel::TensorParallelLayout>& layouts,
                                        const parallel::PipelineLayout& layout) const;
  checkpoint::ReshardTarget to_target(const LoadTarget& target) const;
  // What this rank writes of `run` into a torch_dist checkpoint.
  std::shared_ptr<const checkpoint::TorchDistPlan> torch_dist_plan(const RunStateRefs& run,
                                                                   const nlohmann::json& run_config) const;

  CheckpointPlan plan_;
  const parallel::ParallelContext& pc_;
  const parallel::ParallelState& ps_;
  bool distributed_optimizer_;
  std::ostream& out_;
  Log log_;  // warnings, to out_
  std::unique_ptr<OutputLock> lock_;
  std::unique_ptr<checkpoint::AsyncCheckpointSaver> async_saver_;
  std::function<void()> on_commit_;
  std::shared_ptr<const checkpoint::AssetFiles> tokenizer_files_;  // rank 0 of a run that saves them
  std::vector<std::int64_t> other_runs_;
  mutable std::optional<std::int64_t> model_vocab_rows_;  // iterations another run left in --save, removed at the first commit
};

}  // namespace megatron::train
