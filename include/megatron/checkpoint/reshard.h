// Loading a checkpoint saved in another tensor x pipeline x expert layout: each parameter a rank
// holds now is found where the saved layout put it (stage, chunk, stage-local name), its saved TP
// shards are joined (for expert weights the expert-TP shards of each EP rank's block of experts,
// then the blocks) and this rank's shard is cut; the optimizer's fp32 state likewise.
#pragma once

#include <string>
#include <vector>

#include "megatron/checkpoint/checkpoint.h"
#include "megatron/parallel/parallel_context.h"
#include "megatron/parallel/pipeline_layout.h"

namespace megatron::checkpoint {

// Copies checkpoint tensors into the model's parameters; every name and shape must match
// (differences are listed in the error).
void load_parameters(const NamedTensors& params, const NamedTensors& saved, const std::string& where);

// Resharding a checkpoint saved in another TP x PP layout: what was saved ...
struct ReshardSource {
  int tp = 1;
  parallel::PipelineLayout layout;  // the saved layer split (SavedRun::pipeline)
  bool tied_embeddings = true;      // the output layer is the word embedding
  int ep = 1;                       // expert-parallel size: each EP rank's folders hold its experts
  int etp = 0;                      // the experts' TP size (0: tp); max(tp, etp) folders per stage and EP rank
};
// ... and what this rank holds now: its parameters under their current names, their TP layouts,
// its TP rank and size, its pipeline stage and the current layer split.
struct ReshardTarget {
  const NamedTensors& params;
  const std::vector<parallel::TensorParallelLayout>& layouts;
  int tp_rank = 0;
  int tp = 1;
  int pp_rank = 0;
  parallel::PipelineLayout layout;
  int ep_rank = 0;  // expert weights (layout expert_parallel): this rank's block of the experts
  int ep = 1;
  int etp_rank = 0;  // and of each expert this expert-TP rank's shard
  int etp = 0;       // 0: tp (etp_rank then tp_rank)
  std::size_t buffers = 0;  // the last `buffers` of params are buffers (expert biases): no optimizer state
};
// This rank's parameters cut from the saved shards (model), and with `load_optimizer` its whole
// fp32 optimizer state as one piece per parameter and key ("<name>/<key>/0", in optimizer_parts);
// counters and config from the saved first shard; no RNG state (the streams belong to a layout).
CheckpointState load_resharded(const std::string& root, std::int64_t iteration, const ReshardSource& saved,
                               const ReshardTarget& target, bool load_optimizer);
// The whole model's name of parameter `name` of stage `pp_rank` in `layout`: the chunk prefix
// dropped, a layer's number made global ("model1.decoder.layers.0.x" -> "decoder.layers.6.x").
std::string full_model_name(const std::string& name, const parallel::PipelineLayout& layout, int pp_rank);
// Where a full model's parameter (global layer numbers: "decoder.layers.<global>.rest") lives in a
// pipeline layout: the stage, and the name that stage's checkpoint gives it ("model<c>." first
// with several chunks, the layer numbered within its chunk).
struct StagePlace {
  int stage = 0;
  std::string name;
};
StagePlace stage_place(const std::string& full_name, const parallel::PipelineLayout& layout);
// Whether two splits put the same layers in the same stages and chunks (however the flags said it).
bool same_layer_split(const parallel::PipelineLayout& a, const parallel::PipelineLayout& b);

}  // namespace megatron::checkpoint
