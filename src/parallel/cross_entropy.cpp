// Vocab-parallel cross entropy (spec 10.7, see tensor_parallel.h) as one autograd function: the
// logits are never gathered; two all-reduces over TP (the max, then the packed target logit and
// sum of exponentials). The softmax is kept for backward. At TP size 1 nothing is communicated.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "megatron/core/check.h"
#include "megatron/parallel/tensor_parallel.h"

namespace megatron::parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& targets,
                            const ParallelContext* pc) {
    const int tp = tp_size(*pc);
    const std::int64_t vocab_per_rank = logits.size(-1);
    const std::int64_t start = vocab_per_rank * tp_rank(*pc), end = start + vocab_per_rank;

    at::Tensor x = logits.to(at::kFloat);  // [s, b, V/tp]
    at::Tensor max = std::get<0>(x.max(-1)).contiguous();
    if (tp > 1) pc->comm->all_reduce(max, ReduceOp::kMax, *pc->tp).wait();
    x = x - max.unsqueeze(-1);

    const at::Tensor foreign = (targets < start).logical_or(targets >= end);  // not this rank's id
    const at::Tensor local_target = (targets - start).masked_fill(foreign, 0);
    const at::Tensor predicted = x.gather(-1, local_target.unsqueeze(-1)).squeeze(-1).masked_fill(foreign, 0.0);
    const at::Tensor exp = x.exp_();
    at::Tensor packed = at::stack({predicted, exp.sum(-1)});  // [2, s, b]: one all-reduce for both
    if (tp > 1) pc->comm->all_reduce(packed, ReduceOp::kSum, *pc->tp).wait();
    const at::Tensor sum_exp = packed[1];
    const at::Tensor loss = sum_exp.log() - packed[0];

    const at::Tensor softmax = exp.div_(sum_exp.unsqueeze(-1));
    ctx->save_for_backward({softmax, foreign, local_target});
    ctx->saved_data["dtype"] = static_cast<std::int64_t>(logits.scalar_type());
    return loss;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& softmax = saved[0];
    const at::Tensor owned = saved[1].logical_not().to(softmax.scalar_type());
    // softmax - one_hot(target) on the rank owning the target, times the incoming gradient.
    at::Tensor grad = softmax.clone();
    grad.scatter_add_(-1, saved[2].unsqueeze(-1), -owned.unsqueeze(-1));
    grad.mul_(grads[0].unsqueeze(-1));
    const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {grad.to(dtype), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits, const at::Tensor& targets,
                                        const ParallelContext& pc) {
  MEGATRON_CHECK(logits.dim() >= 1 && targets.sizes() == logits.sizes().slice(0, logits.dim() - 1),
                 "internal error: cross entropy of logits ", logits.sizes(), " against targets ", targets.sizes());
  return VocabParallelCrossEntropy::apply(logits, targets, &pc);
}

}  // namespace megatron::parallel
