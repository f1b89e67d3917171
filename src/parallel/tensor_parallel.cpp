// Tensor-parallel layers at TP size 1 (see tensor_parallel.h).
#include "megatron/parallel/tensor_parallel.h"

#include "megatron/core/check.h"

namespace megatron::parallel {
namespace {

void require_single_tp(const ParallelState& ps) {
  MEGATRON_CHECK(ps.tp() == 1, "--tensor-model-parallel-size ", ps.tp(),
                 " is not supported by this build yet (tensor-parallel communication arrives with the "
                 "communicator); use 1");
}

}  // namespace

void init_normal(at::Tensor& t, double std, at::Generator& gen) {
  at::NoGradGuard no_grad;
  if (std == 0.0) {
    t.zero_();
  } else {
    t.normal_(0.0, std, gen);
  }
}

at::Tensor make_parameter(at::IntArrayRef shape) {
  return at::zeros(shape, at::kFloat).set_requires_grad(true);
}

at::Tensor copy_to_tensor_parallel_region(const at::Tensor& x, const ParallelState& ps) {
  require_single_tp(ps);
  return x;
}

at::Tensor reduce_from_tensor_parallel_region(const at::Tensor& x, const ParallelState& ps) {
  require_single_tp(ps);
  return x;
}

ColumnParallelLinear::ColumnParallelLinear(int in_features, int out_features, bool bias, double init_std,
                                           at::Generator& gen, const ParallelState& ps)
    : ps_(&ps) {
  require_single_tp(ps);
  weight_ = make_parameter({out_features / ps.tp(), in_features});
  init_normal(weight_, init_std, gen);
  if (bias) bias_ = make_parameter({out_features / ps.tp()});
}

at::Tensor ColumnParallelLinear::forward(const at::Tensor& x) const {
  return at::linear(copy_to_tensor_parallel_region(x, *ps_), weight_, bias_);
}

void ColumnParallelLinear::collect(const std::string& prefix, NamedTensors& out) const {
  out.emplace_back(prefix + "weight", weight_);
  if (bias_.defined()) out.emplace_back(prefix + "bias", bias_);
}

RowParallelLinear::RowParallelLinear(int in_features, int out_features, bool bias, double init_std,
                                     at::Generator& gen, const ParallelState& ps)
    : ps_(&ps) {
  require_single_tp(ps);
  weight_ = make_parameter({out_features, in_features / ps.tp()});
  init_normal(weight_, init_std, gen);
  if (bias) bias_ = make_parameter({out_features});
}

at::Tensor RowParallelLinear::forward(const at::Tensor& x) const {
  return reduce_from_tensor_parallel_region(at::linear(x, weight_), *ps_);
}

void RowParallelLinear::collect(const std::string& prefix, NamedTensors& out) const {
  out.emplace_back(prefix + "weight", weight_);
  if (bias_.defined()) out.emplace_back(prefix + "bias", bias_);
}

VocabParallelEmbedding::VocabParallelEmbedding(std::int64_t padded_vocab_size, int hidden_size, double init_std,
                                               at::Generator& gen, const ParallelState& ps)
    : ps_(&ps) {
  require_single_tp(ps);
  const std::int64_t per_rank = padded_vocab_size / ps.tp();
  vocab_start_ = per_rank * ps.tp_rank();
  vocab_end_ = vocab_start_ + per_rank;
  weight_ = make_parameter({per_rank, hidden_size});
  init_normal(weight_, init_std, gen);
}

at::Tensor VocabParallelEmbedding::forward(const at::Tensor& ids) const {
  return reduce_from_tensor_parallel_region(at::embedding(weight_, ids), *ps_);
}

void VocabParallelEmbedding::collect(const std::string& prefix, NamedTensors& out) const {
  out.emplace_back(prefix + "weight", weight_);
}

at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits, const at::Tensor& targets,
                                        const ParallelState& ps) {
  require_single_tp(ps);
  // log-sum-exp minus the target logit, in fp32: the TP=1 case of spec 10.7.
  const at::Tensor x = logits.to(at::kFloat);
  const at::Tensor lse = at::logsumexp(x, -1);
  const at::Tensor target_logit = x.gather(-1, targets.unsqueeze(-1)).squeeze(-1);
  return lse - target_logit;
}

}  // namespace megatron::parallel
