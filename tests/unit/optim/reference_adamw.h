// The independent reference of the optimizer tests: a dense, per-tensor AdamW in double precision,
// written from torch.optim.AdamW's update (decoupled weight decay on 2-D non-bias parameters),
// and the global gradient-norm clipping Megatron applies before it. It reads and writes the
// parameters' .grad and values; the optimizer under test works on flat fp32 buffers instead.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "megatron/optim/adamw.h"

namespace megatron::testing {

class ReferenceAdamW {
 public:
  using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

  ReferenceAdamW(NamedTensors params, const optim::AdamWConfig& config) : params_(std::move(params)), config_(config) {
    for (const auto& [name, p] : params_) {
      main_.push_back(p.detach().to(at::kDouble));
      m_.push_back(at::zeros_like(main_.back()));
      v_.push_back(at::zeros_like(main_.back()));
    }
  }

  void zero_grad() {
    for (auto& [name, p] : params_) p.mutable_grad() = at::Tensor();
  }

  // The L2 norm of every gradient together, in double; scales them by max_norm / (norm + 1e-6)
  // when larger. Returns the norm before clipping.
  double clip_grad_norm(double max_norm) {
    double sum_sq = 0.0;
    for (const auto& [name, p] : params_) {
      if (p.grad().defined()) sum_sq += p.grad().to(at::kDouble).square().sum().item<double>();
    }
    const double norm = std::sqrt(sum_sq);
    coeff_ = max_norm > 0.0 && max_norm / (norm + 1e-6) < 1.0 ? max_norm / (norm + 1e-6) : 1.0;
    return norm;
  }

  void step(double lr, double weight_decay) {
    const at::NoGradGuard no_grad;
    ++step_;
    const double bc1 = 1.0 - std::pow(config_.beta1, step_), bc2 = 1.0 - std::pow(config_.beta2, step_);
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const at::Tensor& p = params_[i].second;
      if (!p.grad().defined()) continue;
      const at::Tensor g = p.grad().to(at::kDouble) * coeff_;
      if (optim::decays_weight(params_[i].first, p)) main_[i].mul_(1.0 - lr * weight_decay);
      m_[i] = config_.beta1 * m_[i] + (1.0 - config_.beta1) * g;
      v_[i] = config_.beta2 * v_[i] + (1.0 - config_.beta2) * g * g;
      main_[i] -= (lr / bc1) * m_[i] / ((v_[i] / bc2).sqrt() + config_.eps);
      p.copy_(main_[i]);
    }
    coeff_ = 1.0;
  }

 private:
  NamedTensors params_;
  optim::AdamWConfig config_;
  std::vector<at::Tensor> main_, m_, v_;
  double coeff_ = 1.0;
  int step_ = 0;
};

}  // namespace megatron::testing
