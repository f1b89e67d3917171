// AdamW on fp32 main parameters over the owned ranges of the DP buffers (see optimizer.h). The
// update is element-wise, so it runs over runs of contiguous elements that share their weight
// decay (one list entry each for the kernels' multi-tensor AdamW) rather than per parameter.
#include "megatron/optim/optimizer.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/dot.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <unordered_map>

#include "megatron/optim/optimizer_state_piece.h"
#include "megatron/core/check.h"
#include "megatron/kernels/aten/adamw_ops.h"

namespace megatron::optim {
namespace {

// One checkpoint piece's data at its offset.
struct Piece {
  std::int64_t offset = 0;
  at::Tensor data;  // 1-D
};

// Elements [begin, end) of one state of a parameter covered by `pieces` (sorted by offset)
// exactly once; each gap or overlap is a problem, named after `what`.
void check_coverage(const std::vector<Piece>& pieces, std::int64_t begin, std::int64_t end, const std::string& what,
                    std::vector<std::string>& errors) {
  std::int64_t reached = begin;
  bool from_piece = false;
  for (const Piece& piece : pieces) {
    const std::int64_t piece_end = piece.offset + piece.data.numel();
    if (piece_end <= begin) continue;
    if (piece.offset >= end) break;
    if (piece.offset > reached) {
      errors.push_back(str_cat(what, ": elements [", reached, ", ", piece.offset, ") are missing"));
    } else if (piece.offset < reached && from_piece) {
      errors.push_back(str_cat(what, ": elements [", std::max(piece.offset, begin), ", ", std::min(reached, piece_end),
                               ") are in two pieces"));
    }
    reached = std::max(reached, piece_end);
    from_piece = true;
  }
  if (reached < end) {
    errors.push_back(str_cat(what, ": elements [", reached, ", ", end,
                             ") are missing (pieces from every data-parallel rank needed)"));
  }
}

}  // namespace

Optimizer::Optimizer(parallel::DataParallelBuffers& buffer, const parallel::ParallelContext& pc,
                     const AdamWConfig& config, std::optional<LossScalerConfig> scaler)
    : buffer_(&buffer), config_(config) {
  if (scaler) scaler_.emplace(*scaler);
  MEGATRON_ASSERT(pc.dp_cp == buffer.context().dp_cp && pc.tp == buffer.context().tp,
                  "the optimizer's parallel context is not the one of its data-parallel buffers");
  const parallel::BufferLayout& layout = buffer.layout();
  const auto& params = buffer.params();
  const auto& layouts = buffer.layouts();
  const int tp_rank = buffer.context().tp->rank();
  const bool first_stage = buffer.context().state->is_first_stage();
  for (std::size_t i = 0; i < params.size(); ++i) param_index_.emplace(params[i].first, static_cast<int>(i));
  std::int64_t main_numel = 0;
  auto extend = [](std::vector<Run>& runs, const Run& r) {
    if (!runs.empty() && runs.back().main_offset + runs.back().numel == r.main_offset &&
        runs.back().buffer_offset + runs.back().numel == r.buffer_offset) {
      runs.back().numel += r.numel;
    } else {
      runs.push_back(r);
    }
  };
  for (std::size_t b = 0; b < layout.buckets.size(); ++b) {
    const parallel::Range owned = buffer.owned_range(static_cast<int>(b));
    owned_.push_back(owned);
    owned_main_offset_.push_back(main_numel);
    std::vector<Segment> in_bucket;
    for (int p : layout.buckets[b].params) {
      const parallel::Range r = layout.params[static_cast<std::size_t>(p)];
      const std::int64_t begin = std::max(r.begin, owned.begin), end = std::min(r.end, owned.end);
      if (begin >= end) continue;
      in_bucket.push_back({p, begin - r.begin, begin, main_numel + (begin - owned.begin), end - begin});
    }
    std::sort(in_bucket.begin(), in_bucket.end(),
              [](const Segment& a, const Segment& c) { return a.buffer_offset < c.buffer_offset; });
    for (const Segment& s : in_bucket) {
      const auto& [name, tensor] = params[static_cast<std::size_t>(s.param)];
      const Run run{s.main_offset, s.buffer_offset, s.numel};
      extend(decays_weight(name, tensor) ? decay_runs_ : no_decay_runs_, run);
      // Each element once: TP-replicated parameters on TP rank 0, the tied embedding on the first
      // stage only (the last stage's output-layer copy is skipped, as Megatron's param_is_not_shared).
      const parallel::TensorParallelLayout& l = layouts[static_cast<std::size_t>(s.param)];
      const bool copy_of_embedding = l.shared_embedding && !first_stage;
      if ((l.sharded() || tp_rank == 0) && !copy_of_embedding && buffer.counts_owned_range(static_cast<int>(b))) {
        extend(norm_runs_, run);
      }
      segments_.push_back(s);
    }
    main_numel += owned.numel();
  }
  const at::TensorOptions fp32 = buffer.grad_data().options().dtype(at::kFloat);
  main_ = at::empty({main_numel}, fp32);
  exp_avg_ = at::zeros({main_numel}, fp32);
  exp_avg_sq_ = at::zeros({main_numel}, fp32);
  // Without sharding every bucket is owned whole and the main layout is the buffer's: an fp32 grad
  // buffer is then the main gradient itself. Otherwise the owned pieces are gathered each step.
  main_grad_aliases_buffer_ = buffer.grad_data().scalar_type() == at::kFloat && main_numel == buffer.grad_data().numel();
  for (std::size_t b = 0; b < owned_.size(); ++b) {
    main_grad_aliases_buffer_ = main_grad_aliases_buffer_ && owned_[b].begin == owned_main_offset_[b];
  }
  main_grad_ = main_grad_aliases_buffer_ ? buffer.grad_data() : at::zeros({main_numel}, fp32);
  reload_model_params();
}

void Optimizer::gather_main_grads() {
  if (main_grad_aliases_buffer_) return;
  at::NoGradGuard no_grad;
  for (std::size_t b = 0; b < owned_.size(); ++b) {
    main_grad_.narrow(0, owned_main_offset_[b], owned_[b].numel())
        .copy_(buffer_->grad_data().narrow(0, owned_[b].begin, owned_[b].numel()));
  }
}


bool Optimizer::unscale_and_check_for_inf() {
  at::NoGradGuard no_grad;
  main_grad_.mul_(1.0 / scaler_->scale());
  at::Tensor found_inf = at::isfinite(main_grad_).all().logical_not().to(at::kFloat).reshape({1});
  const parallel::ProcessGroup& world = *buffer_->context().world;
  if (world.size() > 1) buffer_->context().comm->all_reduce(found_inf, parallel::ReduceOp::kMax, world).wait();
  return found_inf.item<float>() > 0.0f;
}

StepResult Optimizer::step(double lr, double weight_decay, double clip_grad) {
  gather_main_grads();
  StepResult result;
  if (scaler_) {
    const bool found_inf = unscale_and_check_for_inf();
    scaler_->update(found_inf);
    if (found_inf) {
      result.skipped = true;
      return result;
    }
  }
  if (clip_grad > 0.0) result.grad_norm = clip_main_grads(clip_grad);
  adamw(lr, weight_decay, 1.0);
  return result;
}

void Optimizer::reload_model_params() {
  at::NoGradGuard no_grad;
  for (std::size_t b = 0; b < owned_.size(); ++b) {
    main_.narrow(0, owned_main_offset_[b], owned_[b].numel())
        .copy_(buffer_->param_data().narrow(0, owned_[b].begin, owned_[b].numel()));
  }
}

void Optimizer::copy_main_to_model() {
  at::NoGradGuard no_grad;
  at::Tensor param_data = buffer_->param_data();
  for (std::size_t b = 0; b < owned_.size(); ++b) {
    param_data.narrow(0, owned_[b].begin, owned_[b].numel())
        .copy_(main_.narrow(0, owned_main_offset_[b], owned_[b].numel()));
  }
  buffer_->all_gather_params();
}

double Optimizer::clip_grad_norm(double max_norm) {
  gather_main_grads();
  const double norm = clip_main_grads(max_norm);
  if (!main_grad_aliases_buffer_) {  // the clipped values back where the next gather reads them
    at::NoGradGuard no_grad;
    for (std::size_t b = 0; b < owned_.size(); ++b) {
      buffer_->grad_data().narrow(0, owned_[b].begin, owned_[b].numel())
          .copy_(main_grad_.narrow(0, owned_main_offset_[b], owned_[b].numel()));
    }
  }
  return norm;
}

double Optimizer::clip_main_grads(double max_norm) {
  at::NoGradGuard no_grad;
  // Squares summed in fp64 (each fp32 square is exact there), so the norm does not depend on how
  // the gradients are cut into shards and runs; chunks bound the fp64 temporaries.
  constexpr std::int64_t kChunk = std::int64_t{1} << 22;
  std::vector<at::Tensor> sums;
  for (const Run& r : norm_runs_) {
    for (std::int64_t begin = 0; begin < r.numel; begin += kChunk) {
      const at::Tensor chunk =
          main_grad_.narrow(0, r.main_offset + begin, std::min(kChunk, r.numel - begin)).to(at::kDouble);
      sums.push_back(at::dot(chunk, chunk));
    }
  }
  at::Tensor sum_sq =
      sums.empty() ? at::zeros({1}, main_grad_.options().dtype(at::kDouble)) : at::stack(sums).sum().reshape({1});
  const parallel::ProcessGroup& world = *buffer_->context().world;
  if (world.size() > 1) buffer_->context().comm->all_reduce(sum_sq, parallel::ReduceOp::kSum, world).wait();
  const double norm = std::sqrt(sum_sq.item<double>());
  if (max_norm > 0.0 && std::isfinite(norm)) {
    const double coeff = max_norm / (norm + 1e-6);
    if (coeff < 1.0) {
      for (std::size_t b = 0; b < owned_.size(); ++b) {
        main_grad_.narrow(0, owned_main_offset_[b], owned_[b].numel()).mul_(coeff);
      }
    }
  }
  return norm;
}

void Optimizer::adamw(double lr, double weight_decay, double grad_scale) {
  at::NoGradGuard no_grad;
  ++step_;
  for (const bool decay : {true, false}) {
    kernels::aten::AdamWLists lists;
    for (const Run& r : decay ? decay_runs_ : no_decay_runs_) {
      if (r.numel == 0) continue;
      lists.params.push_back(main_.narrow(0, r.main_offset, r.numel));
      lists.grads.push_back(main_grad_.narrow(0, r.main_offset, r.numel));
      lists.exp_avgs.push_back(exp_avg_.narrow(0, r.main_offset, r.numel));
      lists.exp_avg_sqs.push_back(exp_avg_sq_.narrow(0, r.main_offset, r.numel));
    }
    kernels::AdamWHyperparams hyper;
    hyper.lr = lr;
    hyper.beta1 = config_.beta1;
    hyper.beta2 = config_.beta2;
    hyper.eps = config_.eps;
    hyper.weight_decay = decay ? weight_decay : 0.0;
    hyper.step = step_;
    hyper.grad_scale = grad_scale;
    kernels::aten::adamw_step_(lists, hyper);
  }
  copy_main_to_model();
}

NamedTensors Optimizer::state() const {
  NamedTensors out;
  const auto& params = buffer_->params();
  const at::Tensor* tensors[] = {&main_, &exp_avg_, &exp_avg_sq_};  // in kOptimizerStates' order
  for (const Segment& s : segments_) {
    for (std::size_t k = 0; k < kOptimizerStates.size(); ++k) {
      const OptimizerStatePiece piece{params[static_cast<std::size_t>(s.param)].first, kOptimizerStates[k], s.param_offset};
      out.emplace_back(piece.name(), tensors[k]->narrow(0, s.main_offset, s.numel));
    }
  }
  return out;
}

int Optimizer::param_index(const std::string& name) const {
  const auto it = param_index_.find(name);
  return it == param_index_.end() ? -1 : it->second;
}

bool Optimizer::needs_state_piece(const std::string& name, std::int64_t numel) const {
  const auto piece = parse_optimizer_state_piece(name);
  const int index = piece ? param_index(piece->param) : -1;
  if (index < 0) return true;  // load_state reports it
  for (const Segment& s : segments_) {
    if (s.param == index && piece->offset < s.param_offset + s.numel && s.param_offset < piece->offset + numel) {
      return true;
    }
  }
  return false;
}

void Optimizer::load_state(const NamedTensors& pieces, std::int64_t step_count) {
  const auto& params = buffer_->params();
  // by_param[param][key] = pieces sorted by offset
  std::vector<std::array<std::vector<Piece>, kOptimizerStates.size()>> by_param(params.size());
  std::vector<std::string> errors;
  for (const auto& [name, data] : pieces) {
    std::string why;
    const auto piece = parse_optimizer_state_piece(name, &why);
    const int index = piece ? param_index(piece->param) : -1;
    if (index < 0) {
      errors.push_back(str_cat("optimizer state entry '", name, "' ", piece ? "names no parameter of this model" : why,
                               "; was the checkpoint saved with another model?"));
      continue;
    }
    const std::int64_t numel = params[static_cast<std::size_t>(index)].second.numel();
    if (data.dim() != 1 || piece->offset + data.numel() > numel) {
      errors.push_back(str_cat("optimizer state entry '", name, "' has shape ", data.sizes(), " at offset ",
                               piece->offset, ", but ", piece->param, " has ", numel, " elements"));
      continue;
    }
    by_param[static_cast<std::size_t>(index)][static_cast<std::size_t>(piece->state)].push_back({piece->offset, data});
  }
  for (auto& keys : by_param) {
    for (auto& list : keys) {
      std::sort(list.begin(), list.end(), [](const Piece& a, const Piece& b) {
        return a.offset != b.offset ? a.offset < b.offset : a.data.numel() < b.data.numel();
      });
      // Plain-optimizer checkpoints list the same whole piece once per DP rank.
      list.erase(std::unique(list.begin(), list.end(),
                             [](const Piece& a, const Piece& b) {
                               return a.offset == b.offset && a.data.numel() == b.data.numel();
                             }),
                 list.end());
    }
  }
  // Every element this rank owns must come from exactly one piece (other ranks check theirs).
  for (const Segment& s : segments_) {
    const std::string& param = params[static_cast<std::size_t>(s.param)].first;
    const std::int64_t begin = s.param_offset, end = s.param_offset + s.numel;
    for (std::size_t k = 0; k < kOptimizerStates.size(); ++k) {
      check_coverage(by_param[static_cast<std::size_t>(s.param)][k], begin, end,
                     str_cat("optimizer state '", optimizer_state_name(kOptimizerStates[k]), "' of ", param), errors);
    }
  }
  throw_if_problems("cannot load the optimizer state", errors, ProblemHeading::kList);
  at::NoGradGuard no_grad;
  at::Tensor* tensors[] = {&main_, &exp_avg_, &exp_avg_sq_};
  for (const Segment& s : segments_) {
    for (std::size_t k = 0; k < 3; ++k) {
      at::Tensor dst = tensors[k]->narrow(0, s.main_offset, s.numel);
      for (const Piece& piece : by_param[static_cast<std::size_t>(s.param)][k]) {
        const std::int64_t begin = std::max(piece.offset, s.param_offset);
        const std::int64_t end = std::min(piece.offset + piece.data.numel(), s.param_offset + s.numel);
        if (begin >= end) continue;
        dst.narrow(0, begin - s.param_offset, end - begin)
            .copy_(piece.data.narrow(0, begin - piece.offset, end - begin));
      }
    }
  }
  step_ = step_count;
  copy_main_to_model();
}

}  // namespace megatron::optim
