// AdamW's hyperparameters (Megatron's --optimizer adam: torch.optim.AdamW's update with decoupled
// weight decay) and which parameters get weight decay. The update itself is the kernels' AdamW
// (kernels/aten/adamw_ops.h: fused on GPU, the ATen reference on CPU), run by optim::Optimizer.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace megatron::optim {

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

// True when the parameter gets weight decay: 2-D and more, and not a bias (Megatron's default
// no_weight_decay_cond).
bool decays_weight(const std::string& name, const at::Tensor& t);

}  // namespace megatron::optim
