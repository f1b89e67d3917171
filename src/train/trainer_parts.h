// Pieces of the trainer (private to src/train): configuration mapping from the command line to
// the modules, micro-batch reading from a dataset into tensors, and checkpoint state mapping.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <vector>

#include "megatron/checkpoint/checkpoint.h"
#include "megatron/data/data_sampler.h"
#include "megatron/data/dataset_builder.h"
#include "megatron/model/gpt_model.h"
#include "megatron/optim/param_scheduler.h"
#include "megatron/parallel/pipeline_layout.h"
#include "megatron/tokenizer/tokenizer.h"
#include "megatron/train/arguments.h"

namespace megatron::train {

model::ModelConfig to_model_config(const Arguments& args, std::int64_t padded_vocab);
optim::SchedulerConfig to_scheduler_config(const Arguments& args);
std::unique_ptr<tokenizer::Tokenizer> build_run_tokenizer(const Arguments& args);
data::GptDatasets build_run_datasets(const Arguments& args, const tokenizer::Tokenizer& tokenizer,
                                     std::ostream& out);

struct MicroBatch {
  at::Tensor tokens;        // [b, s] int64
  at::Tensor labels;        // [b, s] int64
  at::Tensor loss_mask;     // [b, s] float
  at::Tensor position_ids;  // [b, s] int64
  at::Tensor attention_mask;  // [b, 1, s, s] bool (true = masked), or undefined (plain causal)
  double loss_tokens = 0.0;   // loss_mask's sum, counted on the host while the batch is made
};

// The batch's tensors on `device` (a copy when it is not the CPU).
MicroBatch to_device(MicroBatch batch, const at::Device& device);

// This DP rank's micro batches of one split in Megatron's sampler order (spec 4.11), from
// `consumed_samples` on.
class BatchReader {
 public:
  BatchReader(const data::SampleDataset& dataset, std::uint64_t consumed_samples, int micro_batch_size,
              int dp_rank = 0, int dp_size = 1);
  // The next micro batch; nullopt when the split has no complete step batch left.
  std::optional<MicroBatch> next();
  std::uint64_t consumed_samples() const { return sampler_.consumed_samples(); }

 private:
  const data::SampleDataset* dataset_;
  data::PretrainingSampler sampler_;
  int micro_batch_size_;
  std::vector<std::uint64_t> indices_;
};

// The model-shape entries of two resolved configurations that differ, "name: saved X, now Y".
std::vector<std::string> model_shape_differences(const nlohmann::json& saved, const nlohmann::json& now);

// Copies checkpoint tensors into the model's parameters; every name and shape must match
// (differences are listed in the error).
void load_parameters(const parallel::NamedTensors& params, const checkpoint::NamedTensors& saved,
                     const std::string& where);

// Resharding a checkpoint saved in another TP x PP layout (reshard.cpp): what was saved ...
struct ReshardSource {
  int tp = 1;
  parallel::PipelineLayout layout;  // the saved layer split (saved_pipeline_layout)
  bool tied_embeddings = true;      // the output layer is the word embedding
};
// ... and what this rank holds now: its parameters under their current names, their TP layouts,
// its TP rank and size, its pipeline stage and the current layer split.
struct ReshardTarget {
  const parallel::NamedTensors& params;
  const std::vector<parallel::TensorParallelLayout>& layouts;
  int tp_rank = 0;
  int tp = 1;
  int pp_rank = 0;
  parallel::PipelineLayout layout;
};
// This rank's parameters cut from the saved shards (model), and with `load_optimizer` its whole
// fp32 optimizer state as one piece per parameter and key ("<name>/<key>/0", in optimizer_parts);
// counters and config from the saved first shard; no RNG state (the streams belong to a layout).
checkpoint::CheckpointState load_resharded(const std::string& root, std::int64_t iteration, const ReshardSource& saved,
                                           const ReshardTarget& target, bool load_optimizer);
// Where a full model's parameter (global layer numbers: "decoder.layers.<global>.rest") lives in a
// pipeline layout: the stage, and the name that stage's checkpoint gives it ("model<c>." first
// with several chunks, the layer numbered within its chunk).
struct StagePlace {
  int stage = 0;
  std::string name;
};
StagePlace stage_place(const std::string& full_name, const parallel::PipelineLayout& layout);
// The layer split a saved run configuration used, at pipeline size `pp` (its mp_rank folders).
parallel::PipelineLayout saved_pipeline_layout(const nlohmann::json& config, int pp);
// Whether two splits put the same layers in the same stages and chunks (however the flags said it).
bool same_layer_split(const parallel::PipelineLayout& a, const parallel::PipelineLayout& b);

}  // namespace megatron::train
