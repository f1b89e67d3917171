// A run's checkpoints (see checkpointer.h).
#include "megatron/train/checkpointer.h"

#include <filesystem>
#include <iomanip>
#include <ostream>
#include <set>

#include "megatron/optim/optimizer_state_piece.h"
#include "megatron/checkpoint/reshard.h"
#include "megatron/checkpoint/saved_run.h"
#include "megatron/checkpoint/shard_name.h"
#include "megatron/checkpoint/torch_dist.h"
#include "megatron/core/check.h"
#include "megatron/core/file_io.h"
#include "megatron/core/log.h"
#include "megatron/core/strings.h"
#include "megatron/parallel/parallel_state.h"
#include "megatron/tokenizer/tokenizer_files.h"
#include "megatron/train/training_log.h"

namespace megatron::train {
namespace {

void refuse_another_model(const model::ModelConfig& ours, const model::ModelConfig& saved, const std::string& folder) {
  const auto differences = ours.shape_differences_from(saved);
  throw_if_problems("checkpoint " + folder + " was saved for a different model", differences, ProblemHeading::kList);
}

// The tokenizer settings that change ids, without the paths of its files: Megatron's identity of
// the tokenizer (its class and keyword arguments).
std::pair<std::string, std::vector<std::pair<std::string, std::string>>> tokenizer_settings(
    const tokenizer::TokenizerOptions& o) {
  auto identity = o.identity();
  return {identity.class_name, identity.arguments};
}

// A resume with another tokenizer than the checkpoint's gives its token ids other meanings:
// refused unless --finetune (then a warning), naming both. Files moved elsewhere pass when they
// equal the checkpoint's copies; without copies, other paths only get a note.
void check_same_tokenizer(const checkpoint::SavedRun& run, const tokenizer::TokenizerOptions& ours,
                          const std::string& folder, bool finetune, const Log& log, bool speaks) {
  if (!run.tokenizer_problem.empty()) return;  // a type this build does not know: nothing to compare
  const tokenizer::TokenizerOptions& recorded = run.tokenizer;
  std::string differs;
  if (tokenizer_settings(recorded) != tokenizer_settings(ours)) {
    differs = "another tokenizer";
  } else if (recorded.describe() != ours.describe()) {
    const std::string copies = (std::filesystem::path(folder) / checkpoint::kTokenizerFolder).string();
    const auto copied = tokenizer::options_reading_copies(recorded, copies);
    if (!copied.files_exist() || !ours.files_exist()) {
      if (speaks) log.note("checkpoint " + folder + " was trained with " + recorded.describe() + "; this run reads " +
                           ours.describe() + " (no copy in the checkpoint to compare them with)");
      return;
    }
    if (tokenizer::read_tokenizer_files(copied) != tokenizer::read_tokenizer_files(ours)) {
      differs = "files that differ from the checkpoint's copies in " + copies;
    }
  }
  if (differs.empty()) return;
  const std::string what = "checkpoint " + folder + " was trained with " + recorded.describe() + "; this run gives " +
                           ours.describe() + ", " + differs;
  MEGATRON_CHECK(finetune, what, ": its token ids would mean other tokens. Give the tokenizer it was trained with, "
                 "or --finetune to start a new run from its weights");
  if (speaks) log.warning(what + ": fine-tuning with it (--finetune)");
}

}  // namespace

std::unique_ptr<OutputLock> take_save_folder(const std::string& save, std::ostream& out) {
  auto lock = checkpoint::lock_save_folder(save);
  if (!lock->note().empty()) Log(out).warning(lock->note());
  const auto removed = checkpoint::remove_stale_temporaries(save, lock->note().empty());
  if (!removed.empty()) out << describe_removed_temporaries(removed) << "\n";
  return lock;
}

std::unique_ptr<OutputLock> take_save_folder(const RunPlan& plan, int rank, std::ostream& out) {
  return plan.checkpoint.save && rank == 0 ? take_save_folder(*plan.checkpoint.save, out) : nullptr;
}

Checkpointer::Checkpointer(const CheckpointPlan& plan, const parallel::ParallelContext& pc, bool distributed_optimizer,
                           std::ostream& out, std::unique_ptr<OutputLock> save_lock)
    : plan_(plan),
      pc_(pc),
      ps_(*pc.state),
      distributed_optimizer_(distributed_optimizer),
      out_(out),
      log_(out),
      lock_(std::move(save_lock)) {
  if (plan_.save && plan_.format == checkpoint::CheckpointFormat::kTorchDist && ps_.rank() == 0 &&
      (plan_.save_optimizer || plan_.save_rng)) {
    log_.warning("--ckpt-format torch_dist writes the model, the counters and the scheduler in Megatron-Core's format; "
                 "the optimizer and RNG states are not written in it yet (a resume from these checkpoints, here or in "
                 "Megatron, needs --no-load-optim --no-load-rng, or --finetune)");
  }
}

Checkpointer::~Checkpointer() = default;

void Checkpointer::write_run_config(const nlohmann::json& config) const {
  if (!plan_.save || ps_.rank() != 0) return;
  std::filesystem::create_directories(*plan_.save);
  AtomicFile file((std::filesystem::path(*plan_.save) / "run_config.json").string());
  const std::string text = config.dump(2) + "\n";
  file.write(text.data(), text.size());
  file.commit();
}

void Checkpointer::carry_tokenizer(const tokenizer::TokenizerOptions& tokenizer) {
  if (plan_.save && plan_.save_tokenizer_assets && ps_.rank() == 0) {
    tokenizer_files_ = std::make_shared<const checkpoint::AssetFiles>(tokenizer::read_tokenizer_files(tokenizer));
  }
}

void Checkpointer::save(const RunStateRefs& run, const nlohmann::json& run_config) {
  checkpoint::CheckpointState state;
  run.counters.write_to(state);
  state.scheduler_num_steps = run.scheduler.num_steps();
  state.scheduler = run.scheduler.state();
  state.optimizer_steps = run.optimizer.step_count();
  state.config = run_config;
  state.tokenizer_files = tokenizer_files_;
  state.model = run.model;
  if (const optim::LossScaler* scaler = run.optimizer.scaler()) state.grad_scaler = scaler->state();
  if (plan_.format == checkpoint::CheckpointFormat::kTorchDist) {
    save(state, torch_dist_plan(run, run_config));
    return;
  }
  if (plan_.save_optimizer) state.optimizer = run.optimizer.state();
  if (plan_.save_rng) state.rng = {{"default", run.default_gen.get_state()}, {"model_parallel", run.model_parallel_gen.get_state()}};
  save(state);
}

std::shared_ptr<const checkpoint::TorchDistPlan> Checkpointer::torch_dist_plan(const RunStateRefs& run,
                                                                              const nlohmann::json& run_config) const {
  const checkpoint::ReshardTarget target = rank_target(run.model, run.layouts, run.layout);
  const auto model = checkpoint::SavedRun::from_json(run_config, "this run").model_config("this run");
  auto plan = std::make_shared<checkpoint::TorchDistPlan>(
      checkpoint::plan_torch_dist(target, model, pc_.checkpoint_shard->rank() == 0));
  checkpoint::SavedLayout& layout = plan->layout;  // Megatron's args record the sizes
  layout.format = checkpoint::CheckpointFormat::kTorchDist;
  layout.tp = ps_.tp();
  layout.pp = ps_.pp();
  layout.ep = ps_.ep();
  layout.etp = ps_.expert_tp();
  layout.dp = ps_.dp();
  layout.distributed_optimizer = distributed_optimizer_;
  return plan;
}

void Checkpointer::save(const checkpoint::CheckpointState& state,
                        std::shared_ptr<const checkpoint::TorchDistPlan> torch_dist) {
  const std::string& root = *plan_.save;
  const bool async = plan_.async_save;
  const bool megatron_format = plan_.format == checkpoint::CheckpointFormat::kTorchDist;
  MEGATRON_CHECK(!megatron_format || torch_dist, "a torch_dist checkpoint save without its plan");
  out_ << "[" << timestamp_now() << "] saving checkpoint at iteration " << std::setw(7) << state.iteration << " to "
       << root << " in " << (megatron_format ? "torch_dist" : "megatron-cpp") << " format" << (async ? " (async)" : "")
       << std::endl;
  checkpoint::ShardWriter writer;
  writer.torch_dist = std::move(torch_dist);
  writer.shard = checkpoint::ShardName::of(ps_).str();
  writer.distributed_optimizer = distributed_optimizer_;
  // The ranks writing into one shard folder: DP x CP, or with experts the ranks that hold the same
  // experts and dense shard (the expert-data-parallel group when the experts' TP size is TP:
  // Megatron's writer is expert-data-parallel rank 0). The distributed optimizer writes one file
  // per rank of that group.
  writer.group = pc_.checkpoint_shard.get();
  writer.model = writer.group->rank() == 0;
  writer.dp_rank = writer.group->rank();
  writer.dp_size = writer.group->size();
  writer.ep = ps_.ep();
  writer.tp = ps_.tp();
  writer.etp = ps_.expert_tp();
  if (!async) {
    checkpoint::save_checkpoint(root, state, writer, pc_);
    committed(state.iteration);
    return;
  }
  if (!async_saver_) async_saver_ = std::make_unique<checkpoint::AsyncCheckpointSaver>(pc_);
  if (const auto done = async_saver_->start(root, state, writer)) committed(*done);  // the one before, first
  out_ << "  [" << timestamp_now() << "] scheduled an async checkpoint save at iteration " << std::setw(7)
       << state.iteration << " (host snapshot taken; training goes on while it is written)" << std::endl;
}

void Checkpointer::poll(bool blocking) {
  if (!async_saver_) return;
  if (const auto done = async_saver_->poll(blocking)) committed(*done);
}

void Checkpointer::committed(std::int64_t iteration) {
  const std::string& root = *plan_.save;
  if (on_commit_) on_commit_();
  out_ << "  [" << timestamp_now() << "] successfully saved checkpoint from iteration " << std::setw(7) << iteration
       << " to " << root << " [ t " << ps_.tp_rank() + 1 << "/" << ps_.tp() << ", p " << ps_.pp_rank() + 1 << "/"
       << ps_.pp() << " ]" << std::endl;
  // Retention only now: the new checkpoint is durable and the tracker names it.
  if (ps_.rank() != 0) return;
  remove_other_runs(iteration);
  const checkpoint::RetentionPolicy& policy = plan_.retention;
  if (!policy.active()) return;
  // Rank 0 alone, so a failure here must not throw (the other ranks would wait for it in their
  // next collective): the checkpoints are safe, only the disk keeps more of them.
  try {
    for (const auto& folder : checkpoint::apply_retention(root, iteration, policy)) {
      out_ << "  removed checkpoint " << folder << " (--save-retain-interval / --keep-last-checkpoints)" << std::endl;
    }
  } catch (const std::exception& e) {
    log_.warning(std::string(e.what()) + "; training goes on");
  }
}

// The checkpoints another run left in --save (check_save_folder), once this run has its own: none
// of them may stay beside this run's tracker (a later --ckpt-iteration or a hand-moved tracker
// would load the other run's model). Rank 0; a failure is a warning, as retention's.
void Checkpointer::remove_other_runs(std::int64_t saved) {
  std::vector<std::int64_t> others;
  std::swap(others, other_runs_);
  for (const std::int64_t it : others) {
    if (it == saved || !std::filesystem::exists(checkpoint::iteration_folder(*plan_.save, it))) continue;
    try {
      out_ << "  removed checkpoint " << checkpoint::remove_checkpoint(*plan_.save, it, "another run's checkpoint")
           << " of the run that used this --save folder before" << std::endl;
    } catch (const std::exception& e) {
      log_.warning(std::string(e.what()) + "; training goes on");
    }
  }
}

void Checkpointer::restore(const LoadTarget& target, const RunStateRefs& run) const {
  const auto state = load(target);
  if (!state) return;
  run.optimizer.reload_model_params();
  if (!plan_.finetune) {
    run.counters = TrainState::read_from(*state);
    if (state->scheduler.is_null()) {
      run.scheduler.set_num_steps(state->scheduler_num_steps);  // a checkpoint that records only the count
    } else {
      const std::string folder = checkpoint::iteration_folder(*plan_.load, state->iteration);
      for (const auto& line : run.scheduler.load_state(state->scheduler, plan_.saved_schedule, folder)) {
        log_.record(kLogInfo, "megatron.core.optimizer_param_scheduler", line);
      }
    }
    if (plan_.load_optimizer) {
      // Every DP rank's pieces of this shard's state; the optimizer keeps what this layout owns.
      parallel::NamedTensors pieces;
      for (const auto& part : state->optimizer_parts) pieces.insert(pieces.end(), part.begin(), part.end());
      run.optimizer.load_state(pieces, state->optimizer_steps);
      if (optim::LossScaler* scaler = run.optimizer.scaler(); scaler && !state->grad_scaler.is_null()) {
        scaler->load_state(state->grad_scaler);
      }
    }
    for (const auto& [name, t] : state->rng) {
      if (name == "default") run.default_gen.set_state(t);
      if (name == "model_parallel") run.model_parallel_gen.set_state(t);
    }
  }
  out_ << " successfully loaded checkpoint from " << *plan_.load << " [ t " << ps_.tp_rank() + 1 << "/" << ps_.tp()
       << ", p " << ps_.pp_rank() + 1 << "/" << ps_.pp() << " ] at iteration " << run.counters.iteration << std::endl;
}

std::optional<checkpoint::CheckpointState> Checkpointer::load(const LoadTarget& target) const {
  if (!plan_.load) return std::nullopt;
  const std::string& root = *plan_.load;
  const auto tracker = checkpoint::read_tracker(root);
  if (!tracker) {
    log_.warning("could not find the metadata file " + root + "/" + checkpoint::kTrackerFile +
                 "\n    will not load any checkpoints and will start from random");
    return std::nullopt;
  }
  const std::string folder = checkpoint::iteration_folder(root, *tracker);
  out_ << " loading checkpoint from " << root << " at iteration " << *tracker << std::endl;
  // The layout first: a checkpoint of another TP size or layer split is resharded on the fly.
  const auto saved = checkpoint::read_layout(root, *tracker);
  const std::optional<checkpoint::SavedRun> run =
      saved.config.is_null() ? std::nullopt : std::optional(checkpoint::SavedRun::from_json(saved.config, folder));
  const parallel::PipelineLayout saved_split = run ? run->pipeline.layout(saved.pp) : target.layout;
  // A checkpoint of another model is refused by its differences, before any reshard is tried.
  const model::ModelConfig saved_model = run ? run->model_config(folder) : target.model;
  refuse_another_model(target.model, saved_model, folder);
  if (const auto settings = target.model.setting_differences_from(saved_model); !settings.empty() && ps_.rank() == 0) {
    log_.note("the command line's settings differ from checkpoint " + folder + "'s run; this run follows the command line: " +
              join(settings, ", "));
  }
  if (run) check_same_tokenizer(*run, target.tokenizer, folder, plan_.finetune, log_, ps_.rank() == 0);
  if (run) model_vocab_rows_ = run->model_vocab_rows;
  const bool reshard = saved.tp != ps_.tp() || saved.ep != ps_.ep() || saved.etp != ps_.expert_tp() ||
                       !checkpoint::same_layer_split(saved_split, target.layout);
  const bool load_optimizer = !plan_.finetune && plan_.load_optimizer;
  checkpoint::CheckpointState state;
  if (saved.format == checkpoint::CheckpointFormat::kTorchDist) {
    MEGATRON_CHECK(!load_optimizer, "checkpoint ", folder, " is Megatron-Core's torch_dist checkpoint: its model, "
                   "counters and scheduler are read here, its optimizer state not yet; give --no-load-optim (the "
                   "optimizer starts afresh) or --finetune");
    out_ << " > reading Megatron-Core's distributed checkpoint " << folder << " (saved at tensor-model-parallel size "
         << saved.tp << " x pipeline-model-parallel size " << saved.pp << ") into " << ps_.tp() << " x " << ps_.pp()
         << "; the random-number streams start afresh" << std::endl;
    state = checkpoint::load_torch_dist(root, *tracker, to_target(target));
  } else if (reshard) {
    const bool experts = saved.ep > 1 || ps_.ep() > 1;
    const bool expert_tp = saved.etp != saved.tp || ps_.expert_tp() != ps_.tp();
    out_ << " > resharding checkpoint " << folder << " from tensor-model-parallel size " << saved.tp
         << " x pipeline-model-parallel size " << saved.pp << " (" << saved_split.chunks
         << " virtual stages per pipeline rank)";
    if (experts) out_ << " x expert-model-parallel size " << saved.ep;
    if (expert_tp) out_ << " (expert-tensor-parallel size " << saved.etp << ")";
    out_ << " to " << ps_.tp() << " x " << ps_.pp() << " (" << target.layout.chunks << ")";
    if (experts) out_ << " x " << ps_.ep();
    if (expert_tp) out_ << " (" << ps_.expert_tp() << ")";
    out_ << "; the model and the optimizer state are resharded, the random-number streams start afresh" << std::endl;
    const bool tied = !saved_model.untie_embeddings_and_output_weights;
    state = checkpoint::load_resharded(root, *tracker, {saved.tp, saved_split, tied, saved.ep, saved.etp},
                                       to_target(target), load_optimizer);
  } else {
    // Of every DP rank's optimizer file, only the pieces this rank owns in the current layout.
    state = checkpoint::load_checkpoint(root, *tracker, checkpoint::ShardName::of(ps_).str(), load_optimizer,
                                        !plan_.finetune && plan_.load_rng, target.optimizer_pieces);
    if (load_optimizer && saved.distributed_optimizer) add_sibling_optimizer_pieces(target, *tracker, state);
  }
  refuse_another_model(target.model, checkpoint::SavedRun::from_json(state.config, folder).model_config(folder), folder);
  checkpoint::load_parameters(target.params, state.model, folder + "/" + checkpoint::ShardName::of(ps_).str());
  return state;
}

checkpoint::ReshardTarget Checkpointer::rank_target(const parallel::NamedTensors& params,
                                                    const std::vector<parallel::TensorParallelLayout>& layouts,
                                                    const parallel::PipelineLayout& layout) const {
  return {.params = params,
          .layouts = layouts,
          .tp_rank = ps_.tp_rank(),
          .tp = ps_.tp(),
          .pp_rank = ps_.pp_rank(),
          .layout = layout,
          .ep_rank = ps_.ep_rank(),
          .ep = ps_.ep(),
          .etp_rank = ps_.expert_tp_rank(),
          .etp = ps_.expert_tp()};
}

checkpoint::ReshardTarget Checkpointer::to_target(const LoadTarget& target) const {
  checkpoint::ReshardTarget out = rank_target(target.params, target.layouts, target.layout);
  out.buffers = target.buffers;
  return out;
}

void Checkpointer::add_sibling_optimizer_pieces(const LoadTarget& target, std::int64_t iteration,
                                                checkpoint::CheckpointState& state) const {
  // The distributed optimizer shards the dense parameters over DP x CP and the experts over the
  // expert-data-parallel group, and each rank writes its pieces into its own folder: the state of
  // this rank's dense shard is spread over every folder of the stage with the same TP shard (every
  // EP rank's), that of its experts over the folders of its EP rank with the same expert-TP shard.
  // (The other folders' tensors of the same names are other shards or other experts.)
  std::set<std::string> expert_params;
  for (std::size_t i = 0; i < target.params.size(); ++i) {
    if (target.layouts[i].expert_parallel) expert_params.insert(target.params[i].first);
  }
  const int folders = ps_.checkpoint_shards();
  const auto all = checkpoint::ShardName::all(ps_);
  const std::set<std::string> names(all.begin(), all.end());
  for (int e = 0; e < ps_.ep(); ++e) {
    for (int t = 0; t < folders; ++t) {
      if (e == ps_.ep_rank() && t == ps_.checkpoint_shard_index()) continue;
      const bool dense = t % ps_.tp() == ps_.tp_rank();
      const bool experts = e == ps_.ep_rank() && t % ps_.expert_tp() == ps_.expert_tp_rank();
      if (!dense && !experts) continue;
      const checkpoint::TensorFilter mine = [&](const std::string& name, std::int64_t numel) {
        const auto piece = optim::parse_optimizer_state_piece(name);
        if ((piece && expert_params.contains(piece->param)) ? !experts : !dense) return false;
        return !target.optimizer_pieces || target.optimizer_pieces(name, numel);
      };
      const std::string shard = checkpoint::ShardName{t, ps_.pp_rank(), ps_.pp(), e, ps_.ep()}.str();
      if (!names.contains(shard)) continue;  // no rank of the grid has these coordinates
      auto other = checkpoint::load_checkpoint(*plan_.load, iteration, shard, true, false, mine, /*load_model=*/false);
      for (auto& part : other.optimizer_parts) state.optimizer_parts.push_back(std::move(part));
    }
  }
}

void Checkpointer::check_save_folder(const model::ModelConfig& model, std::int64_t start_iteration) {
  if (!plan_.save) return;
  namespace fs = std::filesystem;
  const std::string& root = *plan_.save;
  std::error_code ec;
  const bool resumes_it = plan_.load && fs::exists(*plan_.load) && fs::equivalent(*plan_.load, root, ec) && !ec;
  const auto iterations = checkpoint::saved_iterations(root);
  const auto tracker = checkpoint::read_tracker(root);
  if (resumes_it || (iterations.empty() && !tracker)) return;
  const std::string which = checkpoint::describe_iterations(iterations);
  const std::string held = str_cat("--save ", root, " already holds checkpoints of another run (iteration",
                                   iterations.size() == 1 ? " " : "s ", which.empty() ? "none" : which,
                                   tracker ? str_cat("; the tracker names ", *tracker) : std::string(), ")");
  if (tracker) {
    const std::string folder = checkpoint::iteration_folder(root, *tracker);
    model::ModelConfig saved;
    try {
      saved = checkpoint::SavedRun::from_json(checkpoint::read_layout(root, *tracker).config, folder).model_config(folder);
    } catch (const Error& e) {
      other_runs_ = iterations;
      log_.warning(str_cat(held, ", whose model cannot be read (", e.what(), "); once this run's first checkpoint "
                           "is saved they are removed"));
      return;
    }
    throw_if_problems(str_cat(held, " for a different model; choose another --save folder, or remove them"),
                      model.shape_differences_from(saved), ProblemHeading::kList);
  }
  other_runs_ = iterations;
  log_.warning(str_cat(held, "; this run starts at iteration ", start_iteration,
                       ", and once its first checkpoint is saved they are removed and the tracker names this run's "
                       "(give --load ", root, " to resume that run instead, or another --save folder to keep them)"));
}

}  // namespace megatron::train
