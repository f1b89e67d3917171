// AdamW with decoupled weight decay (Megatron's --optimizer adam; torch.optim.AdamW's update
// order), fp32 moments, weight decay off for biases and every 1-D parameter; and the global
// gradient-norm clipping Megatron applies before the step (--clip-grad).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace megatron::optim {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

// torch.optim.AdamW's moment and parameter update for step number `step` (1-based), in place on
// p, exp_avg and exp_avg_sq (weight decay, when any, is applied to p by the caller first). Shared
// by AdamW and the DP-buffer Optimizer, so both follow one formula.
void adamw_update(at::Tensor& p, const at::Tensor& grad, at::Tensor& exp_avg, at::Tensor& exp_avg_sq,
                  const AdamWConfig& config, std::int64_t step, double lr);

class AdamW {
 public:
  AdamW(NamedTensors params, const AdamWConfig& config);

  // One update of every parameter that has a gradient, at this learning rate and weight decay.
  void step(double lr, double weight_decay);
  void zero_grad();

  // True when the parameter gets weight decay (2-D and more, not a bias).
  static bool decays(const std::string& name, const at::Tensor& t);

  // Optimizer state for checkpoints: "<param>.exp_avg", "<param>.exp_avg_sq" and the step count.
  NamedTensors state() const;
  void load_state(const NamedTensors& state, std::int64_t step_count);
  std::int64_t step_count() const { return step_; }
  const NamedTensors& params() const { return params_; }

 private:
  NamedTensors params_;
  AdamWConfig config_;
  std::vector<at::Tensor> exp_avg_, exp_avg_sq_;
  std::vector<bool> decays_;
  std::int64_t step_ = 0;
};

// L2 norm of all gradients together (fp32 accumulation in double); when max_norm > 0 and the
// norm exceeds it, scales every gradient by max_norm / (norm + 1e-6). Returns the norm before
// clipping (Megatron's logged "grad norm").
double clip_grad_norm(const NamedTensors& params, double max_norm);

}  // namespace megatron::optim
