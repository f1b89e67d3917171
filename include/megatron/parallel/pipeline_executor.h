// Runs a pipeline schedule (pipeline_schedule.h) on this rank: forward and backward steps through
// the caller's functions, activations and their gradients between stages over the communicator's
// pipeline group. The transfers of one exchange are posted together (sends non-blocking, then the
// receives awaited), which waits for no more than Megatron's batched exchanges do, so a schedule
// that runs under Megatron's blocking semantics cannot deadlock here. Each transfer carries a tag
// naming its (micro-batch, chunk, direction), so a mismatch is a hang that the communicator's
// timeout reports, never a silent mix-up. Activations have one shape and dtype, known in advance
// ([s, b, h], or [s/tp, b, h] with sequence parallelism). Sends finish before run() returns.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "megatron/parallel/parallel_context.h"
#include "megatron/parallel/pipeline_schedule.h"

namespace megatron::parallel {

struct PipelineSteps {
  // Forward of (microbatch, chunk). `input` is the received activation (a leaf that requires grad
  // when training), undefined on the first virtual stage. Returns the activation for the next
  // stage, or on the last virtual stage the scalar loss the backward pass starts from.
  std::function<at::Tensor(int microbatch, int chunk, const at::Tensor& input)> forward;
  // Called just before the backward of (microbatch, chunk) (e.g. to enable the gradient
  // reduction for the last micro-batch). May be empty.
  std::function<void(int microbatch, int chunk)> before_backward;
};

class PipelineExecutor {
 public:
  // `activation_shape` and `options`: what moves between stages. `pc` must outlive the executor.
  PipelineExecutor(const ParallelContext& pc, const PipelineShape& shape, std::vector<std::int64_t> activation_shape,
                   at::TensorOptions options);

  // One training iteration: the schedule of this rank's stage, with backward steps.
  void train(const PipelineSteps& steps);
  // Evaluation: forward steps only (forward_only_schedule), no gradients kept.
  void forward_only(const PipelineSteps& steps);

  const PipelineShape& shape() const { return shape_; }

  // Where the last run() spent its time on this rank: in the forward and backward steps, and in
  // all (steps, transfers and waits). 1 - busy / total is this stage's idle share (its bubble).
  struct Timing {
    double busy_seconds = 0.0;
    double total_seconds = 0.0;
  };
  const Timing& last_timing() const { return timing_; }

 private:
  void run(const std::vector<PipelineEvent>& events, const PipelineSteps& steps, bool training);

  const ParallelContext* pc_;
  PipelineShape shape_;
  std::vector<std::int64_t> activation_shape_;
  at::TensorOptions options_;
  Timing timing_;
};

}  // namespace megatron::parallel
