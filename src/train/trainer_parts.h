// Pieces of the trainer (private to src/train): the run's datasets, its FLOPs, this rank's model and its memory.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <vector>

#include "megatron/checkpoint/checkpoint.h"
#include "megatron/data/dataset_builder.h"
#include "megatron/model/gpt_model.h"
#include "megatron/optim/param_scheduler.h"
#include "megatron/parallel/data_parallel.h"
#include "megatron/parallel/pipeline_executor.h"
#include "megatron/parallel/pipeline_layout.h"
#include "megatron/tokenizer/tokenizer.h"
#include "megatron/train/arguments.h"
#include "megatron/train/batch_reader.h"
#include "megatron/train/memory_preflight.h"
#include "megatron/train/run_plan.h"

namespace megatron::train {

// The train, validation and test datasets of a run (Megatron's build_train_valid_test_datasets
// lines to `out`); `remove_stale`: also delete index-cache temporaries that dead runs left.
data::GptDatasets build_run_datasets(const DataPlan& data, const tokenizer::TokenizerOptions& tokenizer_options,
                                     const tokenizer::Tokenizer& tokenizer, bool remove_stale, std::ostream& out);

// The FLOPs of one iteration of the global batch (Megatron's num_floating_point_operations), for
// the throughput line and the checkpoints' running total.
double flops_per_iteration(const RunPlan& plan);

// This rank's part of the model: the chunks of its pipeline stage (one per virtual stage), their
// parameters under their checkpoint names ("model<c>." in front with several chunks) with their
// TP layouts, the data-parallel gradient buffers over them, and the schedule that runs them.
struct RankModel {
  std::vector<std::unique_ptr<model::GptModel>> chunks;
  parallel::NamedTensors params;
  std::vector<parallel::TensorParallelLayout> layouts;
  // What its checkpoints hold: the parameters, then the persistent buffers (expert biases).
  parallel::NamedTensors saved;
  std::vector<parallel::TensorParallelLayout> saved_layouts;
  std::unique_ptr<parallel::DataParallelBuffers> ddp;
  std::unique_ptr<parallel::PipelineExecutor> executor;
  bool reads_data = true;  // stages with the embedding or the loss (every stage for explicit masks)
};

// Builds this rank's model (Megatron's layer split by `layout`) on `device`, each parameter drawn
// as this rank's shard of the stream of its name and --seed, and prints Megatron's "number of
// parameters" line on `any` (DP rank 0 of each model-parallel rank).
RankModel build_rank_model(const RunPlan& plan, const parallel::PipelineLayout& layout,
                           const parallel::ParallelState& ps, const parallel::ParallelContext& pc, at::Device device,
                           std::ostream& any);

// This rank's place in the layer split, and the run's numerics, for the memory preflight before
// anything is allocated.
RankShare rank_share(const parallel::ParallelState& ps, const parallel::PipelineLayout& layout);
MemorySettings memory_settings(const RunPlan& plan, at::Device device);

// Megatron's theoretical memory footprint of the layout (report_theoretical_memory's lines).
std::vector<std::string> theoretical_memory_lines(const RunPlan& plan, const parallel::ParallelState& ps,
                                                  const parallel::PipelineLayout& layout);

}  // namespace megatron::train
