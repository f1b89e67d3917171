// Vocab-parallel cross entropy (spec 10.7, see tensor_parallel.h) as one autograd function over the
// kernels' cross-entropy entries (the CUDA kernel on CUDA logits, the ATen reference elsewhere):
// each TP rank reduces its vocabulary shard to per-token (max, sum of exponentials, target logit)
// in one pass, the pieces of every rank travel in ONE packed all-reduce over TP, and the backward
// recomputes softmax - one-hot from the logits and the global (max, sum) without ever holding the
// fp32 softmax. The logits are never gathered. At TP size 1 nothing is communicated.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "megatron/core/check.h"
#include "megatron/kernels/aten/cross_entropy_ops.h"
#include "megatron/parallel/tensor_parallel.h"

namespace megatron::parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& targets,
                            const ParallelContext* pc) {
    const int tp = tp_size(*pc), rank = tp_rank(*pc);
    const std::int64_t vocab_start = logits.size(-1) * rank;
    const kernels::CrossEntropyStats stats = kernels::cross_entropy_shard_stats(logits, targets, vocab_start);
    at::Tensor packed = kernels::cross_entropy_pack_stats(stats, rank, tp);
    if (tp > 1) pc->comm->all_reduce(packed, ReduceOp::kSum, *pc->tp).wait();
    const kernels::CrossEntropyResult r = kernels::cross_entropy_combine_packed(packed, targets, tp);
    ctx->save_for_backward({logits, targets, r.max, r.sum_exp});
    ctx->saved_data["vocab_start"] = vocab_start;
    return r.loss;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const at::Tensor grad =
        kernels::cross_entropy_backward(grads[0], s[0], s[1], s[2], s[3], ctx->saved_data["vocab_start"].toInt());
    return {grad, at::Tensor(), at::Tensor()};
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
