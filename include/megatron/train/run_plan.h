// The run plan: everything one training run needs, made once from the resolved command line. It
// holds each module's own configuration (model, parallel grid, pipeline layout, data-parallel
// buffers, optimizer, loss scaler, scheduler, tokenizer, data) and the trainer's policies (loop,
// exit, checkpoints, TensorBoard); after make_run_plan nothing reads a flag. The derivations
// (virtual-pipeline chunks, iterations, micro-batches, the scaler, the gradient dtype) live here;
// the padded vocabulary in VocabPlan, once the tokenizer is known.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "megatron/checkpoint/async_saver.h"
#include "megatron/core/log.h"
#include "megatron/data/data_sampler.h"
#include "megatron/data/dataset_builder.h"
#include "megatron/model/model_config.h"
#include "megatron/optim/adamw.h"
#include "megatron/optim/loss_scaler.h"
#include "megatron/optim/param_scheduler.h"
#include "megatron/parallel/data_parallel.h"
#include "megatron/parallel/parallel_state.h"
#include "megatron/parallel/pipeline_layout.h"
#include "megatron/tokenizer/tokenizer.h"
#include "megatron/train/arguments.h"

namespace megatron::train {

// The layer split over pipeline stages and their virtual chunks, before the grid exists.
struct PipelinePlan {
  int chunks = 1;  // model chunks per pipeline rank (interleaved schedule when > 1)
  std::optional<int> first_stage_layers, last_stage_layers;
  int microbatch_group_size = 0;  // --microbatch-group-size-per-vp-stage; 0: Megatron's default
  parallel::PipelineLayout layout(int num_layers, int pp) const {
    return {num_layers, pp, chunks, first_stage_layers, last_stage_layers};
  }
};

struct DataPlan {
  data::DataPaths paths;
  data::SampleCountArgs counts;
  // Everything but the tokenizer's identity and the log sinks, which the trainer adds.
  data::GptDatasetConfig dataset;
};

struct LoopPlan {
  std::int64_t train_iters = 0;
  int global_batch_size = 1;
  int micro_batch_size = 1;
  int num_microbatches = 1;  // per DP rank and iteration
  std::uint64_t seed = 1234;
  double clip_grad = 1.0;
  std::int64_t log_interval = 100;
  bool log_throughput = false;
  std::int64_t eval_interval = 1000;  // 0: no evaluation during training
  std::int64_t eval_iters = 100;
  // Micro-batches read ahead on GPU ranks: 2 per --num-workers (0: read on the training thread).
  // CPU ranks read on the training thread: there a reading thread only takes cores from the
  // computation (measured on bench_train.py: 7-15% slower with it).
  int prefetch = 4;
};

struct ExitPlan {
  std::optional<int> signal;  // --exit-signal-handler: the signal number that saves and exits
  std::optional<std::int64_t> interval;         // --exit-interval
  std::optional<std::int64_t> duration_in_mins;  // --exit-duration-in-mins
};

struct CheckpointPlan {
  std::optional<std::string> save, load;
  std::optional<std::int64_t> save_interval;
  bool save_optimizer = true, save_rng = true;
  bool save_tokenizer_assets = true;  // copies of the tokenizer's files in every checkpoint
  bool load_optimizer = true, load_rng = true;
  bool finetune = false;
  bool async_save = false;
  checkpoint::CheckpointFormat format = checkpoint::CheckpointFormat::kNative;  // what --save writes (--ckpt-format)
  optim::SavedSchedule saved_schedule = optim::SavedSchedule::kMustMatch;
  checkpoint::RetentionPolicy retention;
};

struct TensorBoardPlan {
  std::optional<std::string> dir;  // written by the last rank
  int queue_size = 1000;
  std::int64_t log_interval = 1;
  bool timers = false, validation_ppl = false, memory = false, loss_scale = true, world_size = false;
  bool moe_per_layer_logging = false;  // each MoE layer's auxiliary losses too
};

struct PrecisionPlan {
  at::ScalarType params = at::kFloat;  // fp32, --bf16 or --fp16
  std::string params_name = "torch.float32";  // as Megatron prints it
  bool grad_in_fp32 = true;            // the gradient buffer's dtype (else the parameters')
  std::optional<optim::LossScalerConfig> scaler;  // dynamic with --fp16, constant with --loss-scale
  bool mixed() const { return params != at::kFloat; }
};

struct RunPlan {
  parallel::ParallelConfig parallel;
  int distributed_timeout_minutes = 10;
  PipelinePlan pipeline;
  parallel::DataParallelConfig ddp;  // grad_in_fp32 and disable_bucketing already decided
  model::ModelConfig model;          // padded_vocab_size 0 until the tokenizer is known
  VocabPlan vocab;
  tokenizer::TokenizerOptions tokenizer;
  DataPlan data;
  PrecisionPlan precision;
  optim::AdamWConfig adam;
  optim::SchedulerConfig scheduler;
  LoopPlan loop;
  ExitPlan exit;
  CheckpointPlan checkpoint;
  TensorBoardPlan tensorboard;
  int logging_level = kLogInfo;  // --logging-level, else MEGATRON_LOGGING_LEVEL (Python's numbers)
  std::string argument_dump;  // Megatron's "------------------------ arguments ---..." block
  nlohmann::json arguments;   // the resolved flags under Megatron's names, saved with checkpoints
};

// The plan of a resolved command line (parse_arguments' result).
RunPlan make_run_plan(const Arguments& args);

}  // namespace megatron::train
