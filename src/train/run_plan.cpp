// The run plan from the resolved arguments (see run_plan.h): where flags become module
// configurations (the model's and the scheduler's through derived_values.cpp, which the argument
// checks share).
#include "megatron/train/run_plan.h"

#include <algorithm>
#include <climits>

#include "megatron/core/check.h"
#include "megatron/core/exit_signal.h"

namespace megatron::train {
namespace {

PipelinePlan pipeline_plan(const Arguments& args) {
  const ParallelArgs& p = args.parallel;
  PipelinePlan plan;
  plan.chunks = parallel::PipelineLayout::virtual_chunks(args.model.num_layers, p.pipeline_model_parallel_size,
                                                        p.num_virtual_stages_per_pipeline_rank,
                                                        p.num_layers_per_virtual_pipeline_stage);
  plan.first_stage_layers = p.decoder_first_pipeline_num_layers;
  plan.last_stage_layers = p.decoder_last_pipeline_num_layers;
  plan.microbatch_group_size = p.microbatch_group_size_per_vp_stage.value_or(0);
  return plan;
}

DataPlan data_plan(const Arguments& args) {
  const DataArgs& d = args.data;
  DataPlan plan;
  plan.paths.data_path = d.data_path.value_or(std::vector<std::string>{});
  plan.paths.train_data_path = d.train_data_path.value_or(std::vector<std::string>{});
  plan.paths.valid_data_path = d.valid_data_path.value_or(std::vector<std::string>{});
  plan.paths.test_data_path = d.test_data_path.value_or(std::vector<std::string>{});
  plan.paths.mock_data = d.mock_data;
  plan.paths.split = d.split;
  plan.counts.train_samples = args.training.train_samples;
  plan.counts.train_iters = total_train_iters(args);
  plan.counts.global_batch_size = args.training.global_batch_size;
  plan.counts.eval_interval = args.logging.eval_interval;
  plan.counts.eval_iters = args.logging.eval_iters;
  data::GptDatasetConfig& c = plan.dataset;
  c.random_seed = static_cast<std::uint32_t>(args.training.seed);
  c.sequence_length = args.model.seq_length;
  c.data_cache_path = d.data_cache_path.value_or("");
  c.reset_position_ids = d.reset_position_ids;
  c.reset_attention_mask = d.reset_attention_mask;
  c.eod_mask_loss = d.eod_mask_loss;
  c.mid_level_dataset_surplus = d.mid_level_dataset_surplus;
  return plan;
}

PrecisionPlan precision_plan(const PrecisionArgs& x) {
  PrecisionPlan plan;
  plan.params = x.bf16 ? at::kBFloat16 : (x.fp16 ? at::kHalf : at::kFloat);
  plan.params_name = x.params_dtype;
  plan.grad_in_fp32 = plan.params == at::kFloat || x.accumulate_allreduce_grads_in_fp32;
  // Megatron's scalers: dynamic with --fp16, constant with --loss-scale (fp16 or bf16), none otherwise.
  if (x.loss_scale) {
    plan.scaler = optim::LossScalerConfig{false, *x.loss_scale, x.min_loss_scale, x.loss_scale_window, x.hysteresis};
  } else if (x.fp16) {
    plan.scaler = optim::LossScalerConfig{true, x.initial_loss_scale, x.min_loss_scale, x.loss_scale_window, x.hysteresis};
  }
  return plan;
}

parallel::ParallelConfig parallel_config(const Arguments& args) {
  const ParallelArgs& p = args.parallel;
  return {p.world_size,
          p.tensor_model_parallel_size,
          p.pipeline_model_parallel_size,
          p.context_parallel_size,
          p.use_tp_pp_dp_mapping,
          p.expert_model_parallel_size,
          // Without experts their TP size is moot (Megatron keeps it unused).
          args.moe.num_experts ? p.expert_tensor_parallel_size.value_or(0) : 0};
}

parallel::DataParallelConfig ddp_config(const Arguments& args, const PipelinePlan& pipeline, const PrecisionPlan& precision) {
  const ParallelArgs& p = args.parallel;
  parallel::DataParallelConfig ddp;
  ddp.overlap_grad_reduce = p.overlap_grad_reduce;
  ddp.use_distributed_optimizer = p.use_distributed_optimizer;
  ddp.bucket_size = p.ddp_bucket_size;
  ddp.disable_bucketing = pipeline.chunks > 1;  // Megatron buckets only the first chunk; one buffer holds them all
  ddp.grad_in_fp32 = precision.grad_in_fp32;
  return ddp;
}

LoopPlan loop_plan(const Arguments& args) {
  LoopPlan loop;
  loop.train_iters = total_train_iters(args);
  loop.global_batch_size = args.training.global_batch_size;
  loop.micro_batch_size = args.training.micro_batch_size;
  loop.num_microbatches = num_microbatches(args);
  loop.seed = static_cast<std::uint64_t>(args.training.seed);
  loop.clip_grad = args.optimizer.clip_grad;
  loop.log_interval = args.logging.log_interval;
  loop.log_throughput = args.logging.log_throughput;
  loop.eval_interval = args.logging.eval_interval;
  loop.eval_iters = args.logging.eval_iters;
  // PyTorch's DataLoader prefetches two batches per worker; 0 workers read on the training thread.
  loop.prefetch = 2 * args.data.num_workers;
  return loop;
}

ExitPlan exit_plan(const Arguments& args) {
  ExitPlan exit;
  if (args.training.exit_signal_handler) exit.signal = parse_signal_name(args.training.exit_signal, "--exit-signal");
  exit.interval = args.training.exit_interval;
  exit.duration_in_mins = args.training.exit_duration_in_mins;
  return exit;
}

CheckpointPlan checkpoint_plan(const Arguments& args) {
  const CheckpointArgs& k = args.checkpoint;
  CheckpointPlan ckpt;
  ckpt.save = k.save;
  ckpt.load = k.load;
  ckpt.save_interval = k.save_interval;
  ckpt.save_optimizer = !k.no_save_optim;
  ckpt.save_rng = !k.no_save_rng;
  ckpt.save_tokenizer_assets = k.save_tokenizer_assets;
  ckpt.load_optimizer = !k.no_load_optim;
  ckpt.load_rng = !k.no_load_rng;
  ckpt.finetune = k.finetune;
  ckpt.saved_schedule = args.scheduler.use_checkpoint_opt_param_scheduler ? optim::SavedSchedule::kUseCheckpoint
                        : args.scheduler.override_opt_param_scheduler     ? optim::SavedSchedule::kOverride
                                                                           : optim::SavedSchedule::kMustMatch;
  ckpt.async_save = k.async_save;
  ckpt.format = k.ckpt_format == "torch_dist" ? checkpoint::CheckpointFormat::kTorchDist : checkpoint::CheckpointFormat::kNative;
  ckpt.retention = checkpoint::RetentionPolicy{k.save_retain_interval, k.keep_last_checkpoints};
  return ckpt;
}

TensorBoardPlan tensorboard_plan(const Arguments& args) {
  const LoggingArgs& l = args.logging;
  TensorBoardPlan tb;
  tb.dir = l.tensorboard_dir;
  tb.queue_size = static_cast<int>(l.tensorboard_queue_size);
  tb.log_interval = l.tensorboard_log_interval;
  tb.timers = l.log_timers_to_tensorboard;
  tb.validation_ppl = l.log_validation_ppl_to_tensorboard;
  tb.memory = l.log_memory_to_tensorboard;
  tb.loss_scale = l.log_loss_scale_to_tensorboard;
  tb.world_size = l.log_world_size_to_tensorboard;
  tb.moe_per_layer_logging = args.moe.moe_per_layer_logging;
  return tb;
}

// Megatron's precedence: the flag, then the environment, then INFO. Any int is a level (Python's).
int logging_level(const Arguments& args) {
  if (const auto& level = args.logging.logging_level) {
    return static_cast<int>(std::clamp<std::int64_t>(*level, INT_MIN, INT_MAX));
  }
  return log_level_from_environment().value_or(kLogInfo);
}

}  // namespace

RunPlan make_run_plan(const Arguments& args) {
  RunPlan plan;
  plan.arguments = nlohmann::json::parse(to_json(args));
  plan.parallel = parallel_config(args);
  plan.distributed_timeout_minutes = args.parallel.distributed_timeout_minutes;
  plan.pipeline = pipeline_plan(args);
  plan.precision = precision_plan(args.precision);
  plan.ddp = ddp_config(args, plan.pipeline, plan.precision);
  plan.model = model_config(args);
  plan.vocab = vocab_plan(args);
  plan.tokenizer = tokenizer::TokenizerOptions::from_json(plan.arguments);
  plan.data = data_plan(args);
  plan.adam = optim::AdamWConfig{args.optimizer.adam_beta1, args.optimizer.adam_beta2, args.optimizer.adam_eps};
  plan.scheduler = scheduler_config(args);
  plan.loop = loop_plan(args);
  plan.exit = exit_plan(args);
  plan.checkpoint = checkpoint_plan(args);
  plan.tensorboard = tensorboard_plan(args);
  plan.logging_level = logging_level(args);
  plan.argument_dump = format_argument_dump(args);
  return plan;
}

}  // namespace megatron::train
