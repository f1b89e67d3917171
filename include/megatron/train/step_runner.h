// One iteration of this rank's work (DESIGN 5.1 steps 2-7): the micro-batches of its DP share
// through its pipeline chunks (forward and backward in the schedule's order, or forward only for
// evaluation), the gradients finalized (the DP reduction waited for, sequence-parallel norm and
// tied-embedding gradients summed), the optimizer step; the loss averaged over the tokens of every
// DP rank, on the last pipeline stage.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "megatron/model/gpt_model.h"
#include "megatron/optim/optimizer.h"
#include "megatron/parallel/data_parallel.h"
#include "megatron/parallel/pipeline_executor.h"
#include "megatron/train/batch_reader.h"
#include "megatron/train/train_state.h"

namespace megatron::train {

// The parts of this rank's model a step runs; owned by the caller.
struct StepModel {
  std::vector<model::GptModel*> chunks;  // one per virtual pipeline stage
  parallel::DataParallelBuffers* ddp = nullptr;
  parallel::PipelineExecutor* executor = nullptr;
  optim::Optimizer* optimizer = nullptr;
  at::Generator* default_gen = nullptr;         // dropout outside tensor- and sequence-parallel regions
  at::Generator* model_parallel_gen = nullptr;  // dropout inside them
};

struct StepSettings {
  int num_microbatches = 1;  // per DP rank and iteration
  double clip_grad = 0.0;
  bool reads_data = true;       // this stage reads batches (first and last stages; all with explicit masks)
  bool mixed_precision = false;  // for the message when a gradient is not finite
  bool moe_per_layer_logging = false;  // StepReport::moe_layer_losses
};

class StepRunner {
 public:
  StepRunner(StepModel model, StepSettings settings, const parallel::ParallelContext& pc);

  // One training iteration at this learning rate and weight decay; `iteration` is the one it
  // makes (for messages). `reader`: this rank's training batches (null on stages that read none).
  // Throws when the loss or, without a loss scaler, the gradient norm is not finite.
  StepReport train(BatchReader* reader, std::int64_t iteration, double lr, double wd);
  // The mean loss of `steps` evaluation steps (forward only, no dropout) on the last stage; 0
  // elsewhere.
  double evaluate(BatchReader* reader, std::int64_t steps, std::int64_t iteration);

 private:
  // The micro-batches of one step: the sum of masked token losses (last stage; undefined
  // elsewhere) and the token count.
  std::pair<at::Tensor, double> run_microbatches(BatchReader* reader, bool training, std::int64_t iteration);
  // Sum of masked token losses over tokens, over every DP (x CP) rank.
  double mean_over_dp(const at::Tensor& loss_sum, double tokens) const;
  // The MoE auxiliary losses of the last training step, reduced as Megatron logs them (collective
  // over PP and DP; none for a dense model).
  void report_moe_losses(StepReport& report) const;
  // DESIGN 5.1 step 3 (Megatron's finalize_model_grads): the DP reductions waited for, the
  // sequence-parallel norms' gradients summed over TP, the tied embedding's over the embedding
  // group, and the routers' expert biases updated from the step's token counts.
  void finalize_grads();

  StepModel model_;
  StepSettings settings_;
  const parallel::ParallelContext& pc_;
  model::MoeLossSums moe_losses_;  // of the current step's micro-batches
};

}  // namespace megatron::train
