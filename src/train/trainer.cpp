// The training loop (see trainer.h), written as DESIGN.md 5.1 lists one iteration: each DP rank
// reads its slice of the global batch; the micro-batches run forward and backward (TP
// communication only inside the model's regions; with --overlap-grad-reduce the buckets start
// their DP reduction during the last micro-batch's backward); the gradients are finalized (DP
// reduction waited for, sequence-parallel norm gradients summed over TP); the optimizer clips
// over the model-parallel group and steps (its DP shard with the distributed optimizer); the
// last rank prints Megatron's iteration line; checkpoints are written by every rank that owns
// unique state and committed by rank 0.
#include "megatron/train/trainer.h"

#include <ATen/Parallel.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <ctime>

#include "megatron/checkpoint/async_saver.h"
#include "megatron/checkpoint/reshard.h"
#include "megatron/core/check.h"
#include "megatron/core/exit_signal.h"
#include "megatron/core/file_io.h"
#include "megatron/core/process_lock.h"
#include "megatron/core/strings.h"
#include "megatron/kernels/device.h"
#include "megatron/optim/optimizer.h"
#include "megatron/parallel/data_parallel.h"
#include "megatron/parallel/pipeline_executor.h"
#include "megatron/parallel/pipeline_layout.h"
#include "megatron/train/memory_preflight.h"
#include "megatron/train/tensorboard.h"
#include "megatron/train/training_log.h"
#include "trainer_parts.h"

namespace megatron::train {
namespace {

using Clock = std::chrono::steady_clock;

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
        start_time_(Clock::now()) {
    // Installed before setup: a SIGTERM during a long load is then also a clean stop.
    if (plan.exit.signal) exit_signal_ = std::make_unique<ExitSignal>(*plan.exit.signal);
  }
  TrainingResult run(const std::vector<std::string>& startup_messages);

 private:
  void setup(const std::vector<std::string>& startup_messages);
  void build_datasets();
  void maybe_load();
  // Throws naming every shape setting where the saved run's model differs from this one.
  void refuse_another_model(const model::ModelConfig& saved, const std::string& folder) const;
  // This rank's place in the layer split and the run's numerics, for the memory preflight before
  // anything is allocated.
  RankShare rank_share() const;
  MemorySettings memory_settings() const;
  void build_model();
  // The micro-batches of one iteration (training) or one evaluation step through this rank's part
  // of the pipeline: the sum of masked token losses (last stage; undefined elsewhere) and tokens.
  std::pair<at::Tensor, double> run_microbatches(BatchReader* reader, bool training);
  BatchReaderOptions reader_options() const;
  void train_step();
  // Sum of masked token losses and the token count of this rank's micro-batches, summed over DP.
  std::pair<double, double> reduce_loss(const at::Tensor& loss_sum, double tokens);
  double evaluate(const data::SampleDataset& dataset, std::int64_t& consumed, std::int64_t iters);
  void log_iteration(bool regular);
  // Megatron's "[Rank r] (after N iterations) memory (MB) | ..." line (GPU runs, DP rank 0);
  // whether to report again at the next log point.
  bool report_memory(std::int64_t start_iteration);
  void save();
  // --async-save: commits the save in flight once every rank's write is done (blocking: waits for
  // it); collective, called at the same point by every rank.
  void finish_async_save(bool blocking);
  void saved(std::int64_t iteration);  // the success line and retention, after a commit
  // Megatron's training_log scalars for this iteration (every --tensorboard-log-interval).
  void write_tensorboard_iteration(double loss);
  // '<key> validation' (and its ppl with --log-validation-ppl-to-tensorboard), by iteration and
  // by consumed samples.
  void write_tensorboard_validation(double loss);
  // True on every rank when it is true on any (an all-reduce MAX over the world): every rank
  // then takes the same exit, as Megatron's signal handler and duration check do.
  bool any_rank(bool mine);
  // Megatron's checkpoint_and_decide_exit after each iteration, in its order: the exit signal,
  // the regular save, the duration, the exit interval. Returns the early-exit reason or "".
  std::string checkpoint_and_decide_exit(std::int64_t& last_saved);
  // Megatron's print_datetime: "[what] datetime: 2026-11-24 13:09:49.123456 " on rank 0.
  void print_datetime(const std::string& what);
  nlohmann::json run_config() const;

  const RunPlan& plan_;
  parallel::Communicator& comm_;
  NullStream null_;
  std::ostream& out_;   // rank 0's lines (Megatron's print_rank_0)
  std::ostream& last_;  // the last rank's lines (print_rank_last): iterations, validation
  std::ostream& any_;   // lines every rank prints
  std::unique_ptr<OutputLock> save_lock_;  // rank 0, with --save
  std::unique_ptr<parallel::ParallelState> ps_;
  parallel::ParallelContext pc_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  model::ModelConfig model_config_;  // the run's model, its vocabulary padded for the tokenizer
  std::unique_ptr<Generators> gens_;
  at::Device device_ = at::kCPU;  // the GPU of this rank's local rank, or the CPU
  // This rank's model chunks (one per virtual pipeline stage), their parameters together under
  // their checkpoint names ("model<c>." in front with several chunks), and the schedule runner.
  std::vector<std::unique_ptr<model::GptModel>> chunks_;
  parallel::NamedTensors params_;
  std::vector<parallel::TensorParallelLayout> layouts_;
  std::unique_ptr<parallel::PipelineExecutor> executor_;
  parallel::PipelineLayout layout_;  // the layer split over stages and chunks
  bool reads_data_ = true;  // stages with the embedding or the loss (every stage for explicit masks)
  std::unique_ptr<parallel::DataParallelBuffers> ddp_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::ParamScheduler> scheduler_;
  data::GptDatasets datasets_;
  std::unique_ptr<BatchReader> train_reader_;
  std::int64_t iteration_ = 0;
  std::int64_t consumed_train_ = 0;
  std::int64_t consumed_valid_ = 0;
  double flops_so_far_ = 0.0;
  double flops_per_iteration_ = 0.0;
  // Interval accumulators for the log line.
  double interval_loss_ = 0.0;
  std::int64_t interval_iters_ = 0;     // iterations in the interval
  std::int64_t interval_advanced_ = 0;  // of which not skipped (their losses are averaged)
  std::int64_t interval_skipped_ = 0;
  std::int64_t interval_nan_ = 0;
  Clock::time_point interval_start_;
  double last_grad_norm_ = 0.0;
  TrainingResult result_;
  Clock::time_point start_time_;          // Megatron's _TRAIN_START_TIME, for --exit-duration-in-mins
  std::unique_ptr<ExitSignal> exit_signal_;  // --exit-signal-handler
  std::unique_ptr<TensorBoardWriter> tensorboard_;  // --tensorboard-dir, on the last rank
  std::unique_ptr<checkpoint::AsyncCheckpointSaver> async_saver_;  // --async-save
};

void Trainer::setup(const std::vector<std::string>& startup_messages) {
  comm_.set_timeout(std::chrono::minutes(plan_.distributed_timeout_minutes));
  const CheckpointPlan& ckpt = plan_.checkpoint;
  if (ckpt.save && comm_.rank() == 0) {
    save_lock_ = checkpoint::lock_save_folder(*ckpt.save);
    if (!save_lock_->note().empty()) out_ << "WARNING: " << save_lock_->note() << "\n";
    const auto removed = checkpoint::remove_stale_temporaries(*ckpt.save, save_lock_->note().empty());
    if (!removed.empty()) out_ << describe_removed_temporaries(removed) << "\n";
  }
  for (const auto& line : startup_messages) out_ << line << "\n";
  out_ << plan_.argument_dump;
  out_ << "> building " << plan_.tokenizer.type << " tokenizer ..." << std::endl;
  tokenizer_ = tokenizer::build_tokenizer(plan_.tokenizer);
  const auto vocab = static_cast<std::int64_t>(tokenizer_->vocab_size());
  model_config_ = plan_.model;
  model_config_.padded_vocab_size = plan_.vocab.padded(vocab);
  out_ << format_padded_vocab_line(vocab, model_config_.padded_vocab_size) << "\n";
  out_ << "> initializing torch distributed ... (" << comm_.backend() << ")" << std::endl;
  ps_ = std::make_unique<parallel::ParallelState>(plan_.parallel, comm_.rank());
  pc_ = parallel::ParallelContext::create(*ps_, comm_);
  out_ << "> initialized tensor model parallel with size " << ps_->tp() << "\n"
       << "> initialized pipeline model parallel with size " << ps_->pp() << std::endl;
  device_ = kernels::select_device(comm_.local_rank());
  out_ << "> training on " << kernels::describe_device(device_) << " in " << plan_.precision.params_name
       << (device_.is_cpu() ? " (no usable GPU: CPU ranks)" : " (one GPU per rank, by local rank)") << std::endl;
  const TensorBoardPlan& tb = plan_.tensorboard;
  if (tb.dir && comm_.rank() == comm_.world_size() - 1) {
    last_ << "> setting tensorboard ..." << std::endl;
    tensorboard_ = std::make_unique<TensorBoardWriter>(*tb.dir, tb.queue_size);
    if (tb.memory && device_.is_cpu()) {
      last_ << "WARNING: --log-memory-to-tensorboard writes GPU memory statistics; this run is on the CPU" << std::endl;
    }
  }
  const std::uint64_t seed = plan_.loop.seed;
  out_ << "> setting random seeds to " << seed << " ..." << std::endl;
  gens_ = std::make_unique<Generators>(Generators{kernels::make_generator(device_, ps_->default_seed(seed)),
                                                  kernels::make_generator(device_, ps_->model_parallel_seed(seed))});
  layout_ = plan_.pipeline.layout(model_config_.num_layers, ps_->pp());
  check_memory_fits(model_config_, rank_share(), memory_settings(), device_memory(device_, comm_.local_size()));
  build_model();
  optimizer_ = std::make_unique<optim::Optimizer>(*ddp_, pc_, plan_.adam, plan_.precision.scaler);
  scheduler_ = std::make_unique<optim::ParamScheduler>(plan_.scheduler);
  const model::ModelConfig& m = model_config_;
  const FlopsShape shape{m.num_layers,       m.hidden_size, m.ffn_hidden_size, m.num_attention_heads,
                         m.num_query_groups, m.kv_channels, m.padded_vocab_size, m.seq_length, m.swiglu};
  flops_per_iteration_ = flops_per_batch(shape, plan_.loop.global_batch_size);
  out_ << "setting number of microbatches to constant " << plan_.loop.num_microbatches << std::endl;
  maybe_load();
  build_datasets();
  const std::int64_t train_iters = plan_.loop.train_iters;
  MEGATRON_CHECK(datasets_.train() != nullptr || iteration_ >= train_iters, "the training split is empty; check --split");
  if (datasets_.train() != nullptr && iteration_ < train_iters && reads_data_) {
    train_reader_ = std::make_unique<BatchReader>(*datasets_.train(), static_cast<std::uint64_t>(consumed_train_),
                                                  reader_options());
  }
  if (ckpt.save && comm_.rank() == 0) {
    std::filesystem::create_directories(*ckpt.save);
    AtomicFile config_file((std::filesystem::path(*ckpt.save) / "run_config.json").string());
    const std::string text = run_config().dump(2) + "\n";
    config_file.write(text.data(), text.size());
    config_file.commit();
  }
}

RankShare Trainer::rank_share() const {
  RankShare share{ps_->rank(), ps_->tp(), ps_->tp_rank(), ps_->pp(), ps_->pp_rank(), ps_->dp(), {}};
  for (int c = 0; c < layout_.chunks; ++c) share.chunk_layers.push_back(layout_.layers(ps_->pp_rank(), c).count);
  return share;
}

MemorySettings Trainer::memory_settings() const {
  MemorySettings m;
  m.param_bytes = static_cast<int>(c10::elementSize(plan_.precision.params));
  m.grad_in_fp32 = plan_.precision.grad_in_fp32;
  m.distributed_optimizer = plan_.ddp.use_distributed_optimizer;
  m.micro_batch_size = plan_.loop.micro_batch_size;
  m.explicit_attention =
      plan_.data.dataset.reset_attention_mask || !model::uses_sdpa(model_config_.attention_backend, device_);
  return m;
}

// The model chunks of this rank's pipeline stage (Megatron's layer split), their data-parallel
// buffer and the schedule that runs them. Initialisation draws every full weight from the
// single-process stream (the seed alone, as --use-cpu-initialization does) and keeps this rank's
// shard of its chunks' layers: any layout starts from the same weights.
void Trainer::build_model() {
  const int pp = ps_->pp();
  const int chunks = layout_.chunks;
  const parallel::PipelineLayout& layout = layout_;
  const model::ModelConfig& config = model_config_;
  const std::uint64_t seed = plan_.loop.seed;
  for (int c = 0; c < chunks; ++c) {
    const auto range = layout.layers(ps_->pp_rank(), c);
    const model::StageSpec stage{range.first, range.count, ps_->is_first_stage() && c == 0,
                                 ps_->is_last_stage() && c == chunks - 1};
    at::Generator init_gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    chunks_.push_back(std::make_unique<model::GptModel>(config, pc_, init_gen, stage,
                                                        at::TensorOptions().device(device_).dtype(plan_.precision.params)));
    const std::string prefix = chunks > 1 ? "model" + std::to_string(c) + "." : "";
    for (const auto& [name, t] : chunks_.back()->named_parameters()) params_.emplace_back(prefix + name, t);
    const auto& l = chunks_.back()->parameter_layouts();
    layouts_.insert(layouts_.end(), l.begin(), l.end());
  }
  reads_data_ = ps_->is_first_stage() || ps_->is_last_stage() || plan_.data.dataset.reset_attention_mask;
  std::int64_t count = 0;
  for (const auto& [name, t] : params_) count += t.numel();
  if (ps_->dp_rank() == 0 && ps_->cp_rank() == 0) {
    any_ << " > number of parameters on (tensor, pipeline) model parallel rank (" << ps_->tp_rank() << ", "
         << ps_->pp_rank() << "): " << count << std::endl;
  }
  ddp_ = std::make_unique<parallel::DataParallelBuffers>(params_, layouts_, pc_, plan_.ddp);
  const std::int64_t seq = config.seq_length / (config.sequence_parallel && ps_->tp() > 1 ? ps_->tp() : 1);
  executor_ = std::make_unique<parallel::PipelineExecutor>(
      pc_, parallel::PipelineShape{pp, chunks, plan_.loop.num_microbatches, plan_.pipeline.microbatch_group_size},
      std::vector<std::int64_t>{seq, plan_.loop.micro_batch_size, config.hidden_size},
      at::TensorOptions().device(device_).dtype(plan_.precision.params));
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

nlohmann::json Trainer::run_config() const {
  nlohmann::json config = plan_.arguments;
  config["model"] = model_config_.to_json();
  return config;
}

void Trainer::refuse_another_model(const model::ModelConfig& saved, const std::string& folder) const {
  const auto differences = model_config_.shape_differences_from(saved);
  if (differences.empty()) return;
  std::string message = "checkpoint " + folder + " was saved for a different model:";
  for (const auto& d : differences) message += "\n  " + d;
  MEGATRON_FAIL(message);
}

void Trainer::maybe_load() {
  if (!plan_.checkpoint.load) return;
  const std::string& root = *plan_.checkpoint.load;
  const auto tracker = checkpoint::read_tracker(root);
  if (!tracker) {
    out_ << "WARNING: could not find the metadata file " << root << "/" << checkpoint::kTrackerFile
         << "\n    will not load any checkpoints and will start from random" << std::endl;
    return;
  }
  const bool finetune = plan_.checkpoint.finetune;
  const std::string folder = checkpoint::iteration_folder(root, *tracker);
  out_ << " loading checkpoint from " << root << " at iteration " << *tracker << std::endl;
  // The layout first: a checkpoint of another TP size or layer split is resharded on the fly.
  const auto saved = checkpoint::read_layout(root, *tracker);
  const parallel::PipelineLayout saved_split =
      saved.config.is_null() ? layout_ : checkpoint::saved_pipeline_layout(saved.config, saved.pp);
  // A checkpoint of another model is refused by its differences, before any reshard is tried.
  const model::ModelConfig saved_model =
      saved.config.is_null() ? model_config_ : checkpoint::saved_model_config(saved.config, folder);
  refuse_another_model(saved_model, folder);
  const bool reshard = saved.tp != ps_->tp() || !checkpoint::same_layer_split(saved_split, layout_);
  const bool load_optim = !finetune && plan_.checkpoint.load_optimizer;
  checkpoint::CheckpointState state;
  if (reshard) {
    out_ << " > resharding checkpoint " << folder << " from tensor-model-parallel size " << saved.tp
         << " x pipeline-model-parallel size " << saved.pp << " (" << saved_split.chunks
         << " virtual stages per pipeline rank) to " << ps_->tp() << " x " << ps_->pp() << " (" << layout_.chunks
         << "); the model and the optimizer state are resharded, the random-number streams start afresh" << std::endl;
    const bool tied = !saved_model.untie_embeddings_and_output_weights;
    const checkpoint::ReshardTarget target{params_, layouts_, ps_->tp_rank(), ps_->tp(), ps_->pp_rank(), layout_};
    state = checkpoint::load_resharded(root, *tracker, {saved.tp, saved_split, tied}, target, load_optim);
  } else {
    // Of every DP rank's optimizer file, only the pieces this rank owns in the current layout.
    state = checkpoint::load_checkpoint(
        root, *tracker, ps_->checkpoint_shard_name(), load_optim, !finetune && plan_.checkpoint.load_rng,
        [this](const std::string& name, std::int64_t numel) { return optimizer_->needs_state_piece(name, numel); });
  }
  refuse_another_model(checkpoint::saved_model_config(state.config, folder), folder);
  checkpoint::load_parameters(params_, state.model, folder + "/" + ps_->checkpoint_shard_name());
  optimizer_->reload_model_params();
  if (!finetune) {
    iteration_ = state.iteration;
    consumed_train_ = state.consumed_train_samples;
    consumed_valid_ = state.consumed_valid_samples;
    flops_so_far_ = state.floating_point_operations_so_far;
    scheduler_->set_num_steps(state.scheduler_num_steps);
    if (plan_.checkpoint.load_optimizer) {
      // Every DP rank's pieces of this shard's state; the optimizer keeps what this layout owns.
      parallel::NamedTensors pieces;
      for (const auto& part : state.optimizer_parts) pieces.insert(pieces.end(), part.begin(), part.end());
      optimizer_->load_state(pieces, state.optimizer_steps);
      if (optim::LossScaler* scaler = optimizer_->scaler(); scaler && !state.grad_scaler.is_null()) {
        scaler->load_state(state.grad_scaler);
      }
    }
    for (const auto& [name, t] : state.rng) {
      if (name == "default") gens_->default_gen.set_state(t);
      if (name == "model_parallel") gens_->model_parallel_gen.set_state(t);
    }
  }
  out_ << " successfully loaded checkpoint from " << root << " [ t " << ps_->tp_rank() + 1 << "/" << ps_->tp()
       << ", p " << ps_->pp_rank() + 1 << "/" << ps_->pp() << " ] at iteration " << iteration_ << std::endl;
}

// --num-workers N: a thread keeps 2N micro-batches ready (PyTorch's DataLoader prefetches two per
// worker); 0 reads them on the training thread, as a DataLoader without workers does.
BatchReaderOptions Trainer::reader_options() const {
  return BatchReaderOptions{plan_.loop.micro_batch_size, ps_->dp_rank(), ps_->dp(), plan_.loop.prefetch,
                            device_};
}

std::pair<double, double> Trainer::reduce_loss(const at::Tensor& loss_sum, double tokens) {
  // On the host (the MPI communicator's tensors; one small copy per step); no micro-batches: zero.
  const auto options = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor sum = loss_sum.defined() ? loss_sum.detach().to(at::kCPU, at::kDouble) : at::zeros({}, options);
  at::Tensor both = at::stack({sum, at::scalar_tensor(tokens, options)});
  comm_.all_reduce(both, parallel::ReduceOp::kSum, *pc_.dp_cp).wait();
  const double* v = both.data_ptr<double>();
  return {v[0], v[1]};
}

std::pair<at::Tensor, double> Trainer::run_microbatches(BatchReader* reader, bool training) {
  const model::ForwardContext ctx = training ? model::ForwardContext{true, &gens_->default_gen, &gens_->model_parallel_gen}
                                             : model::ForwardContext{false, nullptr, nullptr};
  std::vector<MicroBatch> batches;
  if (reads_data_) {
    for (int m = 0; m < plan_.loop.num_microbatches; ++m) {
      auto batch = reader->next();
      MEGATRON_CHECK(batch.has_value(), "the ", training ? "training" : "evaluation", " data ran out at iteration ",
                     iteration_ + 1, "; this is a bug in the sample counts");
      batches.push_back(std::move(*batch));
    }
  }
  // The losses stay tensors (on the model's device) until the step is done: no host
  // synchronisation per micro-batch.
  at::Tensor loss_sum;
  double tokens = 0.0;
  const double loss_scale = training ? optimizer_->loss_scale() : 1.0;
  parallel::PipelineSteps steps;
  steps.forward = [&](int m, int c, const at::Tensor& input) {
    model::GptModel& chunk = *chunks_[static_cast<std::size_t>(c)];
    if (!chunk.pre_process()) chunk.set_input_tensor(input);
    static const MicroBatch kNone{};
    const MicroBatch& b = reads_data_ ? batches[static_cast<std::size_t>(m)] : kNone;
    const at::Tensor out = chunk.forward(chunk.pre_process() ? b.tokens : at::Tensor(),
                                         chunk.pre_process() ? b.position_ids : at::Tensor(), b.attention_mask,
                                         chunk.post_process() ? b.labels : at::Tensor(), ctx);
    if (!chunk.post_process()) return out;
    const at::Tensor sum = (out * b.loss_mask).sum();
    loss_sum = loss_sum.defined() ? loss_sum + sum.detach() : sum.detach();
    tokens += b.loss_tokens;
    // The backward scalar; times the loss scale with a scaler (fp16), which the optimizer divides out.
    return (sum / std::max(1.0, b.loss_tokens)) * (loss_scale / plan_.loop.num_microbatches);
  };
  if (training) {
    steps.before_backward = [&](int m, int) { ddp_->set_last_microbatch(m == plan_.loop.num_microbatches - 1); };
    executor_->train(steps);
  } else {
    at::NoGradGuard no_grad;
    executor_->forward_only(steps);
  }
  return {loss_sum, tokens};
}

void Trainer::train_step() {
  ddp_->zero_grad();
  const auto [loss_sum, tokens] = run_microbatches(train_reader_.get(), true);
  ddp_->finish_grad_sync();
  parallel::allreduce_sequence_parallel_grads(*ddp_);
  parallel::allreduce_shared_embedding_grads(*ddp_);
  // The loss exists on the last pipeline stage, which prints it.
  double loss = 0.0;
  if (ps_->is_last_stage()) {
    const auto [sum, count] = reduce_loss(loss_sum, tokens);
    loss = sum / std::max(1.0, count);
    MEGATRON_CHECK(std::isfinite(loss), "iteration ", iteration_ + 1, " on rank ", ps_->rank(),
                   ": the loss is not finite (", loss, "); stopping. Lower --lr or check the data");
    result_.iteration_losses.push_back(loss);
  }
  const optim::StepResult step = optimizer_->step(scheduler_->lr(), scheduler_->wd(), plan_.loop.clip_grad);
  // Without a loss scaler an inf/NaN gradient cannot be skipped: stop and say so (with one, an
  // overflow is the scaler's signal and the step was skipped).
  MEGATRON_CHECK(step.skipped || std::isfinite(step.grad_norm), "iteration ", iteration_ + 1, " on rank ",
                 ps_->rank(), ": the gradient norm is not finite; stopping",
                 plan_.precision.mixed() ? "" : " (mixed precision with --fp16 would skip it)");
  last_grad_norm_ = step.grad_norm;
  // Megatron's train_step: the scheduler advances only on a successful update; the iteration and
  // the consumed samples always do.
  if (!step.skipped) scheduler_->step(plan_.loop.global_batch_size);
  ++iteration_;
  consumed_train_ += plan_.loop.global_batch_size;
  flops_so_far_ += flops_per_iteration_;
  ++interval_iters_;
  if (step.skipped) {
    ++interval_skipped_;
    ++result_.skipped_iterations;
  } else {
    interval_loss_ += loss;
    ++interval_advanced_;
  }
  if (tensorboard_ && iteration_ % plan_.tensorboard.log_interval == 0) write_tensorboard_iteration(loss);
}

void Trainer::write_tensorboard_iteration(double loss) {
  TensorBoardWriter& w = *tensorboard_;
  const TensorBoardPlan& l = plan_.tensorboard;
  const double samples = static_cast<double>(consumed_train_);
  const auto both = [&](const std::string& tag, double value) {
    w.add_scalar(tag, value, iteration_);
    w.add_scalar(tag + " vs samples", value, static_cast<std::int64_t>(samples));
  };
  both("learning-rate", scheduler_->lr());
  both("batch-size", plan_.loop.global_batch_size);
  both("lm loss", loss);
  if (l.loss_scale) both("loss-scale", optimizer_->loss_scale());
  if (l.world_size) both("world-size", plan_.parallel.world_size);
  const bool mixed_precision = plan_.precision.mixed();
  if (plan_.loop.clip_grad > 0 || mixed_precision) both("grad-norm", last_grad_norm_);
  if (l.memory && device_.is_cuda()) {
    const kernels::MemoryStats m = kernels::memory_stats(device_);
    w.add_scalar("mem-reserved-bytes", static_cast<double>(m.reserved), iteration_);
    w.add_scalar("mem-allocated-bytes", static_cast<double>(m.allocated), iteration_);
    w.add_scalar("mem-max-allocated-bytes", static_cast<double>(m.max_allocated), iteration_);
    w.add_scalar("mem-allocated-count", static_cast<double>(m.allocation_count), iteration_);
  }
}

void Trainer::write_tensorboard_validation(double loss) {
  if (!tensorboard_) return;
  TensorBoardWriter& w = *tensorboard_;
  w.add_scalar("lm loss validation", loss, iteration_);
  w.add_scalar("lm loss validation vs samples", loss, consumed_train_);
  if (plan_.tensorboard.validation_ppl) {
    const double ppl = std::exp(std::min(20.0, loss));
    w.add_scalar("lm loss validation ppl", ppl, iteration_);
    w.add_scalar("lm loss validation ppl vs samples", ppl, consumed_train_);
  }
  w.flush();
}

double Trainer::evaluate(const data::SampleDataset& dataset, std::int64_t& consumed, std::int64_t iters) {
  std::unique_ptr<BatchReader> reader;
  if (reads_data_) {
    reader = std::make_unique<BatchReader>(dataset, static_cast<std::uint64_t>(consumed), reader_options());
  }
  at::Tensor loss_sum;
  double tokens = 0.0;
  for (std::int64_t i = 0; i < iters; ++i) {
    const auto [sum, count] = run_microbatches(reader.get(), false);
    if (sum.defined()) loss_sum = loss_sum.defined() ? loss_sum + sum : sum;
    tokens += count;
    consumed += plan_.loop.global_batch_size;
  }
  if (!ps_->is_last_stage()) return 0.0;
  const auto [sum, count] = reduce_loss(loss_sum, tokens);
  return sum / std::max(1.0, count);
}

void Trainer::log_iteration(bool regular) {
  const double seconds = std::chrono::duration<double>(Clock::now() - interval_start_).count();
  IterationLogFields f;
  f.timestamp = timestamp_now();
  f.iteration = iteration_;
  f.train_iters = plan_.loop.train_iters;
  f.consumed_samples = consumed_train_;
  f.elapsed_ms_per_iteration = 1000.0 * seconds / static_cast<double>(interval_iters_);
  if (plan_.loop.log_throughput) {
    const double per_iteration_s = seconds / static_cast<double>(interval_iters_);
    f.tflops_per_gpu = flops_per_iteration_ / (per_iteration_s * 1e12 * plan_.parallel.world_size);
    f.tokens_per_second_per_gpu = static_cast<double>(plan_.loop.global_batch_size) * model_config_.seq_length /
                                  per_iteration_s / plan_.parallel.world_size;
  }
  f.learning_rate = scheduler_->lr();
  f.global_batch_size = plan_.loop.global_batch_size;
  // Megatron averages the losses of the advanced (not skipped) iterations of the interval.
  f.losses = {{"lm loss", interval_loss_ / static_cast<double>(std::max<std::int64_t>(1, interval_advanced_))}};
  if (interval_advanced_ == 0) f.losses.clear();
  f.loss_scale = optimizer_->loss_scale();
  const bool mixed_precision = plan_.precision.mixed();
  if (plan_.loop.clip_grad > 0 || mixed_precision) f.grad_norm = last_grad_norm_;
  f.skipped_iterations = interval_skipped_;
  f.nan_iterations = interval_nan_;
  last_ << format_iteration_line(f) << std::endl;
  // Megatron writes the timers at the log points after the first iteration.
  if (tensorboard_ && plan_.tensorboard.timers && regular) {
    tensorboard_->add_scalar("iteration-time", seconds / static_cast<double>(interval_iters_), iteration_);
    if (f.tflops_per_gpu) tensorboard_->add_scalar("throughput", *f.tflops_per_gpu, iteration_);
  }
  if (regular) {
    interval_loss_ = 0.0;
    interval_iters_ = 0;
    interval_advanced_ = 0;
    interval_skipped_ = 0;
    interval_nan_ = 0;
    interval_start_ = Clock::now();
  }
}

bool Trainer::report_memory(std::int64_t start_iteration) {
  if (ps_->dp_rank() == 0) {
    const kernels::MemoryStats m = kernels::memory_stats(device_);
    char line[256];
    const double mib = 1024.0 * 1024.0;
    std::snprintf(line, sizeof(line),
                  "[Rank %d] (after %lld iterations) memory (MB) | allocated: %.2f | max allocated: %.2f | "
                  "reserved: %.2f | max reserved: %.2f",
                  ps_->rank(), static_cast<long long>(iteration_), static_cast<double>(m.allocated) / mib,
                  static_cast<double>(m.max_allocated) / mib, static_cast<double>(m.reserved) / mib,
                  static_cast<double>(m.max_reserved) / mib);
    any_ << line << std::endl;
  }
  return iteration_ <= start_iteration + 1;
}

void Trainer::save() {
  const std::string& root = *plan_.checkpoint.save;
  const bool async = plan_.checkpoint.async_save;
  out_ << "[" << timestamp_now() << "] saving checkpoint at iteration " << std::setw(7) << iteration_ << " to "
       << root << " in megatron-cpp format" << (async ? " (async)" : "") << std::endl;
  checkpoint::CheckpointState state;
  state.iteration = iteration_;
  state.consumed_train_samples = consumed_train_;
  state.consumed_valid_samples = consumed_valid_;
  state.scheduler_num_steps = scheduler_->num_steps();
  state.optimizer_steps = optimizer_->step_count();
  state.floating_point_operations_so_far = flops_so_far_;
  state.config = run_config();
  state.model = params_;
  if (const optim::LossScaler* scaler = optimizer_->scaler()) state.grad_scaler = scaler->state();
  if (plan_.checkpoint.save_optimizer) state.optimizer = optimizer_->state();
  if (plan_.checkpoint.save_rng) {
    state.rng = {{"default", gens_->default_gen.get_state()}, {"model_parallel", gens_->model_parallel_gen.get_state()}};
  }
  checkpoint::ShardWriter writer;
  writer.shard = ps_->checkpoint_shard_name();
  writer.model = ps_->dp_rank() == 0 && ps_->cp_rank() == 0;
  writer.distributed_optimizer = plan_.ddp.use_distributed_optimizer;
  writer.dp_rank = ps_->dp_rank();
  writer.dp_size = ps_->dp();
  if (async) {
    if (!async_saver_) async_saver_ = std::make_unique<checkpoint::AsyncCheckpointSaver>(pc_);
    const auto committed = async_saver_->start(root, state, writer);  // finishes the one before first
    if (committed) saved(*committed);
    out_ << "  [" << timestamp_now() << "] scheduled an async checkpoint save at iteration " << std::setw(7)
         << iteration_ << " (host snapshot taken; training goes on while it is written)" << std::endl;
    return;
  }
  checkpoint::save_checkpoint(root, state, writer, pc_);
  saved(iteration_);
}

void Trainer::finish_async_save(bool blocking) {
  if (!async_saver_) return;
  if (const auto committed = async_saver_->poll(blocking)) saved(*committed);
}

void Trainer::saved(std::int64_t iteration) {
  const std::string& root = *plan_.checkpoint.save;
  if (tensorboard_) tensorboard_->flush();  // a job stopped after this save keeps its curves
  out_ << "  [" << timestamp_now() << "] successfully saved checkpoint from iteration " << std::setw(7) << iteration
       << " to " << root << " [ t " << ps_->tp_rank() + 1 << "/" << ps_->tp() << ", p " << ps_->pp_rank() + 1 << "/"
       << ps_->pp() << " ]" << std::endl;
  // Retention only now: the new checkpoint is durable and the tracker names it.
  const checkpoint::RetentionPolicy& policy = plan_.checkpoint.retention;
  if (comm_.rank() == 0 && policy.active()) {
    // Rank 0 alone, so a failure here must not throw (the other ranks would wait for it in their
    // next collective): the checkpoints are safe, only the disk keeps more of them.
    try {
      for (const auto& folder : checkpoint::apply_retention(root, iteration, policy)) {
        out_ << "  removed checkpoint " << folder << " (--save-retain-interval / --keep-last-checkpoints)" << std::endl;
      }
    } catch (const std::exception& e) {
      out_ << "WARNING: " << e.what() << "; training goes on, older checkpoints stay" << std::endl;
    }
  }
}

bool Trainer::any_rank(bool mine) {
  at::Tensor flag = at::full({1}, mine ? 1 : 0, at::kInt);
  comm_.all_reduce(flag, parallel::ReduceOp::kMax, *pc_.world).wait();
  return flag.item<int>() != 0;
}

void Trainer::print_datetime(const std::string& what) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  std::tm local{};
  localtime_r(&seconds, &local);
  char text[64];
  const std::size_t n = std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &local);
  std::snprintf(text + n, sizeof(text) - n, ".%06lld", static_cast<long long>(micros));
  out_ << "[" << what << "] datetime: " << text << " " << std::endl;
}

std::string Trainer::checkpoint_and_decide_exit(std::int64_t& last_saved) {
  const bool can_save = plan_.checkpoint.save.has_value();
  // Before an exit the save must be durable: an async one is waited for.
  const auto save_here = [&](bool exiting = true) {
    if (can_save && last_saved != iteration_) {
      save();
      last_saved = iteration_;
    }
    if (exiting) finish_async_save(/*blocking=*/true);
  };
  if (exit_signal_ && any_rank(exit_signal_->received())) {
    save_here();
    print_datetime("exiting program after receiving " + signal_name(exit_signal_->signo()) + ".");
    return "signal";
  }
  const auto& save_interval = plan_.checkpoint.save_interval;
  if (can_save && save_interval && iteration_ % *save_interval == 0) save_here(/*exiting=*/false);
  if (const auto& limit = plan_.exit.duration_in_mins) {
    const double minutes = std::chrono::duration<double>(Clock::now() - start_time_).count() / 60.0;
    if (any_rank(minutes > static_cast<double>(*limit))) {
      save_here();
      // Megatron formats the float with Python's str().
      print_datetime("exiting program after " + python_float_repr(minutes) + " minutes");
      return "exit-duration";
    }
  }
  if (plan_.exit.interval && iteration_ % *plan_.exit.interval == 0) {
    save_here();
    print_datetime("exiting program at iteration " + std::to_string(iteration_));
    return "exit-interval";
  }
  return "";
}

TrainingResult Trainer::run(const std::vector<std::string>& startup_messages) {
  setup(startup_messages);
  out_ << "done with setup ...\ntraining ..." << std::endl;
  interval_start_ = Clock::now();
  const std::int64_t start_iteration = iteration_;
  std::int64_t last_saved = iteration_;
  bool report_memory = device_.is_cuda();
  while (iteration_ < plan_.loop.train_iters) {
    train_step();
    finish_async_save(/*blocking=*/false);  // a save in flight is committed once all ranks wrote it
    const bool regular = iteration_ % plan_.loop.log_interval == 0;
    if (regular || iteration_ == start_iteration + 1) {
      log_iteration(regular);
      if (report_memory) report_memory = this->report_memory(start_iteration);
    }
    if (plan_.loop.eval_interval > 0 && iteration_ % plan_.loop.eval_interval == 0 && datasets_.valid() &&
        plan_.loop.eval_iters > 0) {
      const double v = evaluate(*datasets_.valid(), consumed_valid_, plan_.loop.eval_iters);
      last_ << format_validation_block("iteration " + std::to_string(iteration_), {{"lm loss", v}}) << std::endl;
      write_tensorboard_validation(v);
      interval_start_ = Clock::now();
    }
    result_.early_exit = checkpoint_and_decide_exit(last_saved);
    if (!result_.early_exit.empty()) break;
  }
  result_.final_iteration = iteration_;
  if (!result_.early_exit.empty()) return result_;  // Megatron exits right there, without the final evaluation
  if (plan_.checkpoint.save && last_saved != iteration_) save();
  finish_async_save(/*blocking=*/true);
  if (datasets_.valid() && plan_.loop.eval_iters > 0) {
    std::int64_t consumed = consumed_valid_;
    const double v = evaluate(*datasets_.valid(), consumed, plan_.loop.eval_iters);
    last_ << format_validation_block("iteration " + std::to_string(iteration_) + " on validation set",
                                     {{"lm loss", v}})
          << std::endl;
    write_tensorboard_validation(v);
    result_.final_validation_loss = v;
  }
  if (datasets_.test() && plan_.loop.eval_iters > 0) {
    std::int64_t consumed = 0;
    const double v = evaluate(*datasets_.test(), consumed, plan_.loop.eval_iters);
    last_ << format_validation_block("iteration " + std::to_string(iteration_) + " on test set", {{"lm loss", v}})
          << std::endl;
    write_tensorboard_validation(v);  // Megatron writes the test set's loss under the validation tags too
  }
  return result_;
}

}  // namespace

TrainingResult run_training(const Arguments& args, parallel::Communicator& comm,
                            const std::vector<std::string>& startup_messages, std::ostream& out) {
  const RunPlan plan = make_run_plan(args);
  Trainer trainer(plan, comm, out);
  return trainer.run(startup_messages);
}

TrainingResult run_training(const Arguments& args, const std::vector<std::string>& startup_messages, std::ostream& out) {
  const auto comm = parallel::make_single_process_communicator();
  return run_training(args, *comm, startup_messages, out);
}

}  // namespace megatron::train
