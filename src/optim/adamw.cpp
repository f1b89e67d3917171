// AdamW and gradient clipping (see adamw.h).
#include "megatron/optim/adamw.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/linalg_vector_norm.h>

#include <cmath>

#include "megatron/core/check.h"

namespace megatron::optim {

AdamW::AdamW(NamedTensors params, const AdamWConfig& config) : params_(std::move(params)), config_(config) {
  for (const auto& [name, p] : params_) {
    exp_avg_.push_back(at::zeros_like(p, at::MemoryFormat::Contiguous));
    exp_avg_sq_.push_back(at::zeros_like(p, at::MemoryFormat::Contiguous));
    decays_.push_back(decays(name, p));
  }
}

bool AdamW::decays(const std::string& name, const at::Tensor& t) {
  const bool bias = name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0;
  return t.dim() > 1 && !bias;
}

void adamw_update(at::Tensor& p, const at::Tensor& grad, at::Tensor& exp_avg, at::Tensor& exp_avg_sq,
                  const AdamWConfig& config, std::int64_t step, double lr) {
  const double bias_correction1 = 1.0 - std::pow(config.beta1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(config.beta2, static_cast<double>(step));
  const double step_size = lr / bias_correction1;
  const double bias_correction2_sqrt = std::sqrt(bias_correction2);
  exp_avg.lerp_(grad, 1.0 - config.beta1);
  exp_avg_sq.mul_(config.beta2).addcmul_(grad, grad, 1.0 - config.beta2);
  const at::Tensor denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(config.eps);
  p.addcdiv_(exp_avg, denom, -step_size);
}

void AdamW::step(double lr, double weight_decay) {
  at::NoGradGuard no_grad;
  ++step_;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    at::Tensor p = params_[i].second;
    const at::Tensor& g = p.grad();
    if (!g.defined()) continue;
    if (decays_[i] && weight_decay != 0.0) p.mul_(1.0 - lr * weight_decay);
    adamw_update(p, g, exp_avg_[i], exp_avg_sq_[i], config_, step_, lr);
  }
}

void AdamW::zero_grad() {
  for (auto& [name, p] : params_) {
    if (p.grad().defined()) p.mutable_grad() = at::Tensor();
  }
}

NamedTensors AdamW::state() const {
  NamedTensors out;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    out.emplace_back(params_[i].first + ".exp_avg", exp_avg_[i]);
    out.emplace_back(params_[i].first + ".exp_avg_sq", exp_avg_sq_[i]);
  }
  return out;
}

void AdamW::load_state(const NamedTensors& state, std::int64_t step_count) {
  MEGATRON_CHECK(state.size() == 2 * params_.size(), "optimizer state has ", state.size(),
                 " tensors; this model needs ", 2 * params_.size());
  at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const auto& [m_name, m] = state[2 * i];
    const auto& [v_name, v] = state[2 * i + 1];
    MEGATRON_CHECK(m_name == params_[i].first + ".exp_avg" && v_name == params_[i].first + ".exp_avg_sq",
                   "optimizer state entry ", m_name, " does not belong to parameter ", params_[i].first);
    MEGATRON_CHECK(m.sizes() == exp_avg_[i].sizes() && v.sizes() == exp_avg_sq_[i].sizes(),
                   "optimizer state of ", params_[i].first, " has shape ", m.sizes(), ", expected ",
                   exp_avg_[i].sizes());
    exp_avg_[i].copy_(m);
    exp_avg_sq_[i].copy_(v);
  }
  step_ = step_count;
}

double clip_grad_norm(const NamedTensors& params, double max_norm) {
  at::NoGradGuard no_grad;
  double sum_sq = 0.0;
  for (const auto& [name, p] : params) {
    if (p.grad().defined()) {
      const double n = at::linalg_vector_norm(p.grad(), 2).item<double>();  // fp32 accumulation, as torch
      sum_sq += n * n;
    }
  }
  const double norm = std::sqrt(sum_sq);
  if (max_norm > 0.0) {
    const double coeff = max_norm / (norm + 1e-6);
    if (coeff < 1.0) {
      for (const auto& [name, p] : params) {
        if (p.grad().defined()) p.grad().mul_(coeff);
      }
    }
  }
  return norm;
}

}  // namespace megatron::optim
