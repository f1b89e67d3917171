// The training loop (see trainer.h), written as DESIGN.md 5.1 lists one iteration: each DP rank
// reads its slice of the global batch; the micro-batches run forward and backward (TP
// communication only inside the model's regions; with --overlap-grad-reduce the buckets start
// their DP reduction during the last micro-batch's backward); the gradients are finalized (DP
// reduction waited for, sequence-parallel norm gradients summed over TP); the optimizer clips
// over the model-parallel group and steps (its DP shard with the distributed optimizer); the
// last rank prints Megatron's iteration line; checkpoints are written by every rank that owns
// unique state and committed by rank 0.
#include "megatron/train/trainer.h"

#include <chrono>
#include <ostream>

#include "megatron/checkpoint/saved_run.h"
#include "megatron/core/check.h"
#include "megatron/core/log.h"
#include "megatron/core/process_lock.h"
#include "megatron/kernels/device.h"
#include "megatron/optim/optimizer.h"
#include "megatron/parallel/data_parallel.h"
#include "megatron/parallel/pipeline_executor.h"
#include "megatron/parallel/pipeline_layout.h"
#include "megatron/tokenizer/tokenizer_files.h"
#include "megatron/train/checkpointer.h"
#include "megatron/train/exit_policy.h"
#include "megatron/train/iteration_logger.h"
#include "megatron/train/memory_preflight.h"
#include "megatron/train/rank_agreement.h"
#include "megatron/train/startup_report.h"
#include "megatron/train/step_runner.h"
#include "megatron/train/train_state.h"
#include "megatron/train/training_log.h"
#include "trainer_parts.h"

namespace megatron::train {
namespace {

struct Generators {
  at::Generator default_gen;         // hidden and embedding dropout (outside sequence-parallel regions)
  at::Generator model_parallel_gen;  // dropout inside tensor- and sequence-parallel regions
};

// A stream that drops everything: what ranks that do not print write to.
class NullStream : public std::ostream {
 public:
  NullStream() : std::ostream(nullptr) {}
};

class Trainer {
 public:
  Trainer(const RunPlan& plan, parallel::Communicator& comm, std::ostream& out)
      : plan_(plan),
        comm_(comm),
        out_(comm.rank() == 0 ? out : null_),
        last_(comm.rank() == comm.world_size() - 1 ? out : null_),
        any_(out),
        log_(out_),
        exit_policy_(plan.exit, ExitPolicy::Clock::now()) {}
  TrainingResult run(const std::vector<std::string>& startup_messages);

 private:
  // DESIGN 5.1's set-up, in Megatron's order of its log lines.
  void setup(const std::vector<std::string>& startup_messages);
  std::unique_ptr<OutputLock> start(const std::vector<std::string>& startup_messages);
  std::unique_ptr<tokenizer::Tokenizer> build_tokenizer();
  void build_parallel_state();
  void build_model_and_optimizer(std::unique_ptr<OutputLock> save_lock);
  void build_data();
  void build_datasets();
  std::unique_ptr<IterationLogger> make_logger();
  Checkpointer::LoadTarget load_target();
  RunStateRefs run_state();
  BatchReaderOptions reader_options() const;
  void train_step();
  // The mean loss over --eval-iters steps of `dataset` from its `consumed` samples (advanced).
  double evaluate(const data::SampleDataset& dataset, std::int64_t& consumed);
  Progress progress() const;
  // True on every rank when it is true on any (an all-reduce MAX over the world).
  bool any_rank(bool mine);
  // Megatron's checkpoint_and_decide_exit after each iteration, in its order: the exit signal,
  // the regular save, the duration, the exit interval. Returns the early exit, if any.
  std::optional<EarlyExit> checkpoint_and_decide_exit();
  void save_if_new();
  nlohmann::json run_config() const;

  RunPlan plan_;  // completed with the model's padded vocabulary once the tokenizer is known
  parallel::Communicator& comm_;
  NullStream null_;
  std::ostream& out_;   // rank 0's lines (Megatron's print_rank_0)
  std::ostream& last_;  // the last rank's lines (print_rank_last): iterations, validation
  std::ostream& any_;   // lines every rank prints
  Log log_;             // rank 0's messages (warnings, notes), at the run's --logging-level
  ExitPolicy exit_policy_;  // installs the exit signal's handler first: a SIGTERM during a long load is a clean stop
  std::unique_ptr<parallel::ParallelState> ps_;
  parallel::ParallelContext pc_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<Generators> gens_;
  at::Device device_ = at::kCPU;  // the GPU of this rank's local rank, or the CPU
  parallel::PipelineLayout layout_;  // the layer split over stages and chunks
  RankModel model_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::ParamScheduler> scheduler_;
  std::unique_ptr<StepRunner> step_runner_;
  std::unique_ptr<Checkpointer> checkpointer_;
  std::unique_ptr<IterationLogger> logger_;
  std::unique_ptr<StartupReport> report_;
  data::GptDatasets datasets_;
  std::unique_ptr<BatchReader> train_reader_;
  TrainState state_;
  std::int64_t last_saved_ = -1;  // the iteration of the last checkpoint this run saved or loaded
  double flops_per_iteration_ = 0.0;
  TrainingResult result_;
};

void Trainer::setup(const std::vector<std::string>& startup_messages) {
  std::unique_ptr<OutputLock> save_lock = start(startup_messages);
  tokenizer_ = build_tokenizer();
  build_parallel_state();
  report_ = std::make_unique<StartupReport>(comm_, *pc_.world, out_, last_);
  report_->initialized();
  report_->start("model-and-optimizer-setup");
  build_model_and_optimizer(std::move(save_lock));
  checkpointer_->restore(load_target(), run_state());
  checkpointer_->check_save_folder(plan_.model, state_.iteration);
  report_->stop("model-and-optimizer-setup");
  report_->datetime("after model, optimizer, and learning rate scheduler are built");
  report_->start("train/valid/test-data-iterators-setup");
  build_data();
  report_->stop("train/valid/test-data-iterators-setup");
  report_->datetime("after dataloaders are built");
  checkpointer_->write_run_config(run_config());
}

// Before anything is built from the flags: the collective timeout, every rank's flags the same,
// rank 0's --save locked; then Megatron's first lines.
std::unique_ptr<OutputLock> Trainer::start(const std::vector<std::string>& startup_messages) {
  comm_.set_timeout(std::chrono::minutes(plan_.distributed_timeout_minutes));
  check_ranks_agree(plan_.arguments, comm_);
  std::unique_ptr<OutputLock> save_lock = take_save_folder(plan_, comm_.rank(), out_);
  for (const auto& line : startup_messages) log_.line(line);
  out_ << plan_.argument_dump;
  return save_lock;
}

// The tokenizer, and the model's vocabulary padded for it (the plan is complete from here on).
std::unique_ptr<tokenizer::Tokenizer> Trainer::build_tokenizer() {
  out_ << "> building " << plan_.tokenizer.type_name() << " tokenizer ..." << std::endl;
  auto tokenizer = tokenizer::build_tokenizer(plan_.tokenizer);
  const auto vocab = static_cast<std::int64_t>(tokenizer->vocab_size());
  plan_.model.padded_vocab_size = plan_.vocab.padded(vocab);
  out_ << format_padded_vocab_line(vocab, plan_.model.padded_vocab_size) << "\n";
  return tokenizer;
}

// The rank grid and its communicators, this rank's device, the iteration logger and the seeds.
void Trainer::build_parallel_state() {
  out_ << "> initializing torch distributed ... (" << comm_.backend() << ")" << std::endl;
  ps_ = std::make_unique<parallel::ParallelState>(plan_.parallel, comm_.rank());
  pc_ = parallel::ParallelContext::create(*ps_, comm_);
  out_ << "> initialized tensor model parallel with size " << ps_->tp() << "\n"
       << "> initialized pipeline model parallel with size " << ps_->pp() << std::endl;
  device_ = kernels::select_device(comm_.local_rank());
  out_ << "> training on " << kernels::describe_device(device_) << " in " << plan_.precision.params_name
       << (device_.is_cpu() ? " (no usable GPU: CPU ranks)" : " (one GPU per rank, by local rank)") << std::endl;
  flops_per_iteration_ = flops_per_iteration(plan_);
  logger_ = make_logger();  // after the FLOPs: --log-throughput divides them by the iteration time
  const std::uint64_t seed = plan_.loop.seed;
  out_ << "> setting random seeds to " << seed << " ..." << std::endl;
  gens_ = std::make_unique<Generators>(Generators{kernels::make_generator(device_, ps_->default_seed(seed)),
                                                  kernels::make_generator(device_, ps_->model_parallel_seed(seed))});
}

// This rank's model (after the memory preflight), its optimizer, scheduler and step runner, and
// the checkpointer.
void Trainer::build_model_and_optimizer(std::unique_ptr<OutputLock> save_lock) {
  layout_ = plan_.pipeline.layout(plan_.model.num_layers, ps_->pp());
  check_memory_fits(plan_.model, rank_share(*ps_, layout_), memory_settings(plan_, device_),
                    device_memory(device_, comm_.local_size()));
  model_ = build_rank_model(plan_, layout_, *ps_, pc_, device_, any_);
  optimizer_ = std::make_unique<optim::Optimizer>(*model_.ddp, pc_, plan_.adam, plan_.precision.scaler);
  scheduler_ = std::make_unique<optim::ParamScheduler>(plan_.scheduler);
  std::vector<model::GptModel*> chunks;
  for (const auto& c : model_.chunks) chunks.push_back(c.get());
  step_runner_ = std::make_unique<StepRunner>(
      StepModel{chunks, model_.ddp.get(), model_.executor.get(), optimizer_.get(), &gens_->default_gen,
                &gens_->model_parallel_gen},
      StepSettings{plan_.loop.num_microbatches, plan_.loop.clip_grad, model_.reads_data, plan_.precision.mixed(),
                   plan_.tensorboard.moe_per_layer_logging},
      pc_);
  out_ << "setting number of microbatches to constant " << plan_.loop.num_microbatches << std::endl;
  checkpointer_ = std::make_unique<Checkpointer>(plan_, pc_, out_, std::move(save_lock));
  checkpointer_->carry_tokenizer(plan_.tokenizer);
  checkpointer_->on_commit([this] { logger_->flush(); });  // a job stopped after a save keeps its curves
}

// The datasets, and this rank's reader of the training split from the consumed samples on.
void Trainer::build_data() {
  build_datasets();
  const std::int64_t train_iters = plan_.loop.train_iters;
  MEGATRON_CHECK(datasets_.train() != nullptr || state_.iteration >= train_iters,
                 "the training split is empty; check --split");
  if (datasets_.train() != nullptr && state_.iteration < train_iters && model_.reads_data) {
    train_reader_ = std::make_unique<BatchReader>(*datasets_.train(),
                                                  static_cast<std::uint64_t>(state_.consumed_train_samples),
                                                  reader_options());
  }
}

// The index caches: rank 0 builds them (or finds them) first; then the first rank of every other
// node, which finds rank 0's files where the cache folder is shared and builds its node's copy
// where it is node-local; then every other rank, which finds its node's files. Cache files are
// written under temporary names and renamed, so a reader never sees a torn one.
void Trainer::build_datasets() {
  const auto build = [&](bool leader, std::ostream& out) {
    datasets_ = build_run_datasets(plan_.data, plan_.tokenizer, *tokenizer_, leader, out);
  };
  if (comm_.rank() == 0) build(true, out_);
  comm_.barrier(*pc_.world).wait();
  const bool node_leader = comm_.rank() != 0 && comm_.local_rank() == 0;
  if (node_leader) build(false, null_);
  comm_.barrier(*pc_.world).wait();
  if (comm_.rank() != 0 && !node_leader) build(false, null_);
}

// TensorBoard on the last rank (Megatron's writer rank); the memory line from DP rank 0 of GPU runs.
std::unique_ptr<IterationLogger> Trainer::make_logger() {
  const TensorBoardPlan& tb = plan_.tensorboard;
  std::unique_ptr<TensorBoardWriter> writer;
  if (tb.dir && comm_.rank() == comm_.world_size() - 1) {
    last_ << "> setting tensorboard ..." << std::endl;
    writer = std::make_unique<TensorBoardWriter>(*tb.dir, tb.queue_size);
    if (tb.memory && device_.is_cpu()) {
      Log(last_).warning("--log-memory-to-tensorboard writes GPU memory statistics; this run is on the CPU");
    }
  }
  LoggerSettings s;
  s.loop = plan_.loop;
  s.tensorboard = tb;
  s.world_size = plan_.parallel.world_size;
  s.flops_per_iteration = flops_per_iteration_;
  s.seq_length = plan_.model.seq_length;
  s.show_grad_norm = plan_.loop.clip_grad > 0 || plan_.precision.mixed();
  s.memory_out = ps_->dp_rank() == 0 ? &any_ : nullptr;
  s.rank = ps_->rank();
  s.device = device_;
  return std::make_unique<IterationLogger>(std::move(s), last_, std::move(writer));
}

nlohmann::json Trainer::run_config() const {
  checkpoint::SavedRun run;
  run.model = plan_.model;
  run.pipeline = {plan_.model.num_layers, plan_.pipeline.chunks, std::nullopt, plan_.pipeline.first_stage_layers,
                  plan_.pipeline.last_stage_layers};
  run.tokenizer = plan_.tokenizer;
  if (!plan_.vocab.padded_vocab_size) run.vocab_padding = {plan_.vocab.make_vocab_size_divisible_by, plan_.vocab.tp};
  run.model_vocab_rows = checkpointer_->model_vocab_rows();  // an imported model's own rows, carried on
  run.arguments = plan_.arguments;
  return run.to_json();
}

Checkpointer::LoadTarget Trainer::load_target() {
  return {model_.saved, model_.saved_layouts, layout_, plan_.model, plan_.tokenizer,
          [this](const std::string& name, std::int64_t numel) { return optimizer_->needs_state_piece(name, numel); },
          model_.saved.size() - model_.params.size()};
}

RunStateRefs Trainer::run_state() {
  return {state_, *optimizer_, *scheduler_, gens_->default_gen, gens_->model_parallel_gen, model_.saved,
          model_.saved_layouts, layout_};
}

// --num-workers N on a GPU rank: a thread keeps 2N micro-batches ready (PyTorch's DataLoader
// prefetches two per worker) while the GPU computes; 0 reads them on the training thread, as a
// DataLoader without workers does. CPU ranks read on the training thread (see LoopPlan::prefetch).
BatchReaderOptions Trainer::reader_options() const {
  const int prefetch = device_.is_cuda() ? plan_.loop.prefetch : 0;
  return BatchReaderOptions{plan_.loop.micro_batch_size, ps_->dp_rank(), ps_->dp(), prefetch, device_, ps_->cp(),
                            ps_->cp_rank()};
}

Progress Trainer::progress() const {
  return {state_.iteration, state_.consumed_train_samples, scheduler_->lr(), optimizer_->loss_scale()};
}

void Trainer::train_step() {
  const StepReport report =
      step_runner_->train(train_reader_.get(), state_.iteration + 1, scheduler_->lr(), scheduler_->wd());
  if (ps_->is_last_stage()) result_.iteration_losses.push_back(report.loss);
  // Megatron's train_step: the scheduler advances only on a successful update; the iteration and
  // the consumed samples always do.
  if (!report.skipped) scheduler_->step(plan_.loop.global_batch_size);
  if (report.skipped) ++result_.skipped_iterations;
  state_.advance(plan_.loop.global_batch_size, flops_per_iteration_);
  logger_->step(report, progress());
}

double Trainer::evaluate(const data::SampleDataset& dataset, std::int64_t& consumed) {
  std::unique_ptr<BatchReader> reader;
  if (model_.reads_data) reader = std::make_unique<BatchReader>(dataset, static_cast<std::uint64_t>(consumed), reader_options());
  const double loss = step_runner_->evaluate(reader.get(), plan_.loop.eval_iters, state_.iteration + 1);
  consumed += plan_.loop.eval_iters * plan_.loop.global_batch_size;
  return loss;
}

bool Trainer::any_rank(bool mine) {
  at::Tensor flag = at::full({1}, mine ? 1 : 0, at::kInt);
  comm_.all_reduce(flag, parallel::ReduceOp::kMax, *pc_.world).wait();
  return flag.item<int>() != 0;
}

void Trainer::save_if_new() {
  if (!checkpointer_->saves() || last_saved_ == state_.iteration) return;
  checkpointer_->save(run_state(), run_config());
  last_saved_ = state_.iteration;
}

std::optional<EarlyExit> Trainer::checkpoint_and_decide_exit() {
  const auto any = [this](bool mine) { return any_rank(mine); };
  auto stop = exit_policy_.signal(any);
  if (!stop) {
    if (checkpointer_->due(state_.iteration)) save_if_new();
    stop = exit_policy_.limits(state_.iteration, any);
  }
  if (!stop) return std::nullopt;
  // Before an exit the save must be durable: an async one is waited for.
  save_if_new();
  checkpointer_->poll(/*blocking=*/true);
  out_ << format_datetime_line(stop->what) << std::endl;
  return stop;
}

TrainingResult Trainer::run(const std::vector<std::string>& startup_messages) {
  setup(startup_messages);
  out_ << "done with setup ..." << std::endl;
  report_->log_timers();
  for (const std::string& line : theoretical_memory_lines(plan_, *ps_, layout_)) out_ << line << "\n";
  out_ << "training ..." << std::endl;
  report_->datetime("before the start of training step");
  last_saved_ = state_.iteration;
  logger_->start(state_.iteration);
  const LoopPlan& loop = plan_.loop;
  const bool evaluates = datasets_.valid() && loop.eval_iters > 0;
  while (state_.iteration < loop.train_iters) {
    train_step();
    checkpointer_->poll(/*blocking=*/false);  // a save in flight is committed once all ranks wrote it
    if (evaluates && loop.eval_interval > 0 && state_.iteration % loop.eval_interval == 0) {
      const double loss = evaluate(*datasets_.valid(), state_.consumed_valid_samples);
      logger_->validation("iteration " + std::to_string(state_.iteration), loss, progress(), true);
    }
    if (const auto stop = checkpoint_and_decide_exit()) {
      result_.early_exit = stop->reason;
      break;
    }
  }
  result_.final_iteration = state_.iteration;
  if (!result_.early_exit.empty()) {  // Megatron exits right there, without the final evaluation
    logger_->flush();
    return result_;
  }
  report_->datetime("after training is done");
  save_if_new();
  checkpointer_->poll(/*blocking=*/true);
  const std::string at = "iteration " + std::to_string(state_.iteration);
  if (evaluates) {
    std::int64_t consumed = state_.consumed_valid_samples;
    result_.final_validation_loss = evaluate(*datasets_.valid(), consumed);
    logger_->validation(at + " on validation set", *result_.final_validation_loss, progress(), false);
  }
  if (datasets_.test() && loop.eval_iters > 0) {
    std::int64_t consumed = 0;
    // Megatron writes the test set's loss under the validation tags too.
    logger_->validation(at + " on test set", evaluate(*datasets_.test(), consumed), progress(), false);
  }
  logger_->flush();
  return result_;
}

}  // namespace

TrainingResult run_training(const Arguments& args, parallel::Communicator& comm,
                            const std::vector<std::string>& startup_messages, std::ostream& out) {
  const RunPlan plan = make_run_plan(args);
  set_log_level(plan.logging_level);
  Trainer trainer(plan, comm, out);
  return trainer.run(startup_messages);
}

TrainingResult run_training(const Arguments& args, const std::vector<std::string>& startup_messages, std::ostream& out) {
  const auto comm = parallel::make_single_process_communicator();
  return run_training(args, *comm, startup_messages, out);
}

}  // namespace megatron::train
