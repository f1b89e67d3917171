// The optimizer the trainer steps (Megatron's FP32/mixed-precision optimizer and its
// DistributedOptimizer in one): fp32 main parameters kept apart from the model's (which may be
// bf16 or fp16), AdamW on them with torch.optim.AdamW's update order (the kernels' fused AdamW on
// GPU, its ATen reference on CPU), the model's parameters written from them afterwards.
// It works on the flat buffers of the DataParallelBuffers: the main parameters, their fp32
// gradients and the Adam moments are flat fp32 copies of the part of each bucket this rank owns
// (the whole bucket, or with --use-distributed-optimizer this rank's 1/dp shard), so the optimizer
// state per rank shrinks by the DP size with the distributed optimizer. The expert weights of MoE
// layers are in buckets of their own, sharded over the expert-data-parallel group (Megatron's
// separate expert optimizer; one update here, since AdamW is element-wise). Weight decay is off for
// biases and 1-D parameters. With a LossScaler (fp16) the gradients are unscaled and checked for
// inf/NaN over every rank first, and the step is skipped on overflow.
// Not handled: per-group learning rates (--decoupled-lr), other optimizers.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "megatron/optim/adamw.h"
#include "megatron/optim/loss_scaler.h"
#include "megatron/parallel/data_parallel.h"

namespace megatron::optim {

using NamedTensors = parallel::NamedTensors;

// What one optimizer step did.
struct StepResult {
  bool skipped = false;    // an inf/NaN gradient with a loss scaler: nothing was updated
  double grad_norm = 0.0;  // before clipping; 0 when not computed (clip_grad 0, or skipped)
};

class Optimizer {
 public:
  // Copies the owned part of the model's parameters into fp32 main parameters, zero moments.
  // `pc` is the context the buffers were made with; both must outlive the optimizer. `scaler`:
  // the loss scaler of fp16 training (or a constant --loss-scale), none otherwise.
  Optimizer(parallel::DataParallelBuffers& buffers, const parallel::ParallelContext& pc, const AdamWConfig& config,
            std::optional<LossScalerConfig> scaler = std::nullopt);

  // The scale to multiply the loss by before the backward pass (1 without a scaler).
  double loss_scale() const { return scaler_ ? scaler_->scale() : 1.0; }
  const LossScaler* scaler() const { return scaler_ ? &*scaler_ : nullptr; }
  LossScaler* scaler() { return scaler_ ? &*scaler_ : nullptr; }

  // The whole step after the DP reduction (DataParallelBuffers::finish_grad_sync and the
  // sequence-parallel and embedding reductions): the owned gradients into fp32 main gradients
  // (a view of the grad buffer when it is fp32 and not sharded); with a scaler, divided by the
  // scale and checked for inf/NaN over every rank, the scaler updated and the step skipped on overflow; the
  // gradient norm and clipping when clip_grad > 0; AdamW; the model's parameters from the main
  // ones.
  StepResult step(double lr, double weight_decay, double clip_grad);

  // After the DP reduction (DataParallelBuffers::finish_grad_sync and the sequence-parallel TP
  // reduction): the L2 norm of the whole model's gradient, each element counted once. Sums the
  // squares of the gradients this rank owns (its shards with the distributed optimizer; without it
  // only the first rank of each bucket's data-parallel group counts them), skipping TP-replicated
  // parameters (partition_dim -1) except on TP rank 0 and the last stage's copy of a tied
  // embedding, over every rank: dense and expert weights together, Megatron's
  // sqrt(dense norm^2 + expert norm^2). The squares are
  // accumulated in fp64 (unlike adamw.h's clip_grad_norm: fp32 per-tensor norms), which makes the
  // norm independent of the sharding: every DP size and bucket layout clips by the same factor.
  // When max_norm > 0 and the norm exceeds it, scales the owned gradients by
  // max_norm / (norm + 1e-6). Returns the norm before clipping (Megatron's "grad norm"); a
  // non-finite norm is returned and nothing is clipped. What step() does after the unscaling;
  // alone, for gradients that need no unscaling (tests).
  double clip_grad_norm(double max_norm);

  // After the model's parameters were overwritten (a checkpoint loaded without optimizer state):
  // the main parameters are copied from them again (Megatron's reload_model_params).
  void reload_model_params();

  // Checkpoint state, this rank's pieces only: for every parameter the part this rank owns of its
  // flattened fp32 main values, exp_avg and exp_avg_sq, named "<param>/<key>/<offset>" with key
  // "param", "exp_avg" or "exp_avg_sq" and offset the first element's index in the flattened
  // parameter (decimal). Plain optimizer: every parameter whole at offset 0. The tensors are 1-D
  // views of the live state (copy them before the next step if they are written asynchronously).
  NamedTensors state() const;
  // Resumes from pieces saved by any DP size, distributed or not (identical repeated pieces are
  // ignored), and the step count: the elements this rank owns in the current layout are checked to
  // come from exactly one piece each (errors name the parameter and the missing or overlapping
  // elements; pieces outside them are ignored), copied into the state, and the model's parameters
  // are set from the main values (all-gathered over DP with the distributed optimizer).
  void load_state(const NamedTensors& pieces, std::int64_t step_count);
  // Whether a saved piece named as state() names them, of `numel` elements, holds any element this
  // rank owns (unparseable names: true, so that load_state reports them). Lets a resume read only
  // the pieces it needs from the other DP ranks' files.
  bool needs_state_piece(const std::string& name, std::int64_t numel) const;
  std::int64_t step_count() const { return step_; }

  // Elements of fp32 state on this rank: main parameters + exp_avg + exp_avg_sq (padding included).
  std::int64_t state_numel() const { return 3 * main_.numel(); }
  // The fp32 main parameters this rank owns, flat (the owned ranges of the buckets concatenated).
  const at::Tensor& main_params() const { return main_; }

 private:
  // A piece of one parameter inside the owned ranges.
  struct Segment {
    int param = 0;
    std::int64_t param_offset = 0;   // in the flattened parameter
    std::int64_t buffer_offset = 0;  // in the flat buffers
    std::int64_t main_offset = 0;    // in main_ / exp_avg_ / exp_avg_sq_
    std::int64_t numel = 0;
  };
  struct Run {  // contiguous elements sharing a property
    std::int64_t main_offset = 0;
    std::int64_t buffer_offset = 0;
    std::int64_t numel = 0;
  };

  // The index of a parameter by name, -1 when this model has none of that name.
  int param_index(const std::string& name) const;
  void copy_main_to_model();
  // The owned gradients as fp32 main gradients in main_grad_ (nothing to do when it aliases the
  // grad buffer).
  void gather_main_grads();
  // Divides the main gradients by the loss scale; whether any rank saw a non-finite one.
  bool unscale_and_check_for_inf();
  // clip_grad_norm on main_grad_ as it is.
  double clip_main_grads(double max_norm);
  // One AdamW update of the owned main parameters, the main gradients scaled by grad_scale first.
  void adamw(double lr, double weight_decay, double grad_scale);

  parallel::DataParallelBuffers* buffer_;
  AdamWConfig config_;
  std::vector<parallel::Range> owned_;  // per bucket, in the flat buffers
  std::vector<std::int64_t> owned_main_offset_;
  std::vector<Segment> segments_;
  std::unordered_map<std::string, int> param_index_;
  std::vector<Run> decay_runs_;     // elements with weight decay
  std::vector<Run> no_decay_runs_;  // and without
  std::vector<Run> norm_runs_;      // elements counted in the gradient norm
  at::Tensor main_, main_grad_, exp_avg_, exp_avg_sq_;
  bool main_grad_aliases_buffer_ = false;
  std::optional<LossScaler> scaler_;
  std::int64_t step_ = 0;
};

}  // namespace megatron::optim
