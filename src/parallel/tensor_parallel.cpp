// Tensor-parallel layers (see tensor_parallel.h); the cross entropy is in cross_entropy.cpp.
#include "megatron/parallel/tensor_parallel.h"

#include "megatron/core/check.h"
#include "megatron/kernels/ops.h"

namespace megatron::parallel {
namespace {

constexpr TensorParallelLayout kReplicated{};

void check_divisible(std::int64_t size, const char* what, const ParallelContext& pc) {
  MEGATRON_CHECK(size % tp_size(pc) == 0, what, " (", size, ") must be divisible by the tensor-model-parallel size (",
                 tp_size(pc), ")");
}

}  // namespace

void ParameterList::add(std::string name, const at::Tensor& t, const TensorParallelLayout& layout) {
  named.emplace_back(std::move(name), t);
  layouts.push_back(layout);
}

int tp_rank(const ParallelContext& pc) {
  MEGATRON_ASSERT(pc.tp != nullptr, "the parallel context has no TP group");
  return pc.tp->rank();
}

int tp_size(const ParallelContext& pc) {
  MEGATRON_ASSERT(pc.tp != nullptr, "the parallel context has no TP group");
  return pc.tp->size();
}

const ProcessGroup& expert_tp_group(const ParallelContext& pc) {
  MEGATRON_ASSERT(pc.expert_tp != nullptr || pc.tp != nullptr, "the parallel context has no TP group");
  return pc.expert_tp ? *pc.expert_tp : *pc.tp;
}

int expert_tp_rank(const ParallelContext& pc) { return expert_tp_group(pc).rank(); }

int expert_tp_size(const ParallelContext& pc) { return expert_tp_group(pc).size(); }

at::Tensor column_parallel_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                  const ParallelContext& pc, bool sequence_parallel, bool gather_output) {
  const at::Tensor input =
      sequence_parallel ? gather_from_sequence_parallel_region(x, pc) : copy_to_tensor_parallel_region(x, pc);
  const at::Tensor output = kernels::ops::linear(input, weight, bias);
  return gather_output ? gather_from_tensor_parallel_region(output, pc) : output;
}

ColumnParallelLinear::ColumnParallelLinear(int in_features, int out_features, double init_std,
                                           const ParameterInit& init, const ParallelContext& pc,
                                           const LinearOptions& options)
    : pc_(&pc), options_(options) {
  check_divisible(out_features, "the output size of a column-parallel linear layer", pc);
  const TensorParallelLayout layout{0, options.partition_stride, false};
  weight_ = init.normal("weight", {out_features, in_features}, init_std, layout, pc, options.tensor_options);
  if (options.bias) bias_ = zeros_parameter({out_features}, layout, pc, options.tensor_options);
}

at::Tensor ColumnParallelLinear::forward(const at::Tensor& x) const {
  return column_parallel_linear(x, weight_, options_.skip_bias_add ? at::Tensor() : bias_, *pc_,
                                options_.sequence_parallel, options_.gather_output);
}

void ColumnParallelLinear::collect(const std::string& prefix, ParameterList& out) const {
  const TensorParallelLayout layout{0, options_.partition_stride, false};
  out.add(prefix + "weight", weight_, layout);
  if (bias_.defined()) out.add(prefix + "bias", bias_, layout);
}

RowParallelLinear::RowParallelLinear(int in_features, int out_features, double init_std, const ParameterInit& init,
                                     const ParallelContext& pc, const LinearOptions& options)
    : pc_(&pc), options_(options) {
  MEGATRON_CHECK(!options.sequence_parallel || options.input_is_parallel,
                 "internal error: a row-parallel layer under sequence parallelism needs a parallel input");
  check_divisible(in_features, "the input size of a row-parallel linear layer", pc);
  weight_ = init.normal("weight", {out_features, in_features}, init_std, {1, 1, false}, pc, options.tensor_options);
  if (options.bias) bias_ = zeros_parameter({out_features}, kReplicated, pc, options.tensor_options);
}

at::Tensor RowParallelLinear::forward(const at::Tensor& x) const {
  const at::Tensor input = options_.input_is_parallel ? x : scatter_to_tensor_parallel_region(x, *pc_);
  const at::Tensor partial = kernels::ops::linear(input, weight_);
  return options_.sequence_parallel ? reduce_scatter_to_sequence_parallel_region(partial, *pc_)
                                    : reduce_from_tensor_parallel_region(partial, *pc_);
}

void RowParallelLinear::collect(const std::string& prefix, ParameterList& out) const {
  out.add(prefix + "weight", weight_, {1, 1, false});
  // Under sequence parallelism each rank adds the bias to its own tokens only (Megatron marks it).
  if (bias_.defined()) out.add(prefix + "bias", bias_, {-1, 1, options_.sequence_parallel});
}

VocabParallelEmbedding::VocabParallelEmbedding(std::int64_t padded_vocab_size, int hidden_size, double init_std,
                                               const ParameterInit& init, const ParallelContext& pc,
                                               bool reduce_scatter_embeddings, const at::TensorOptions& options)
    : pc_(&pc), reduce_scatter_(reduce_scatter_embeddings) {
  check_divisible(padded_vocab_size, "the padded vocabulary size", pc);
  const std::int64_t per_rank = padded_vocab_size / tp_size(pc);
  vocab_start_ = per_rank * tp_rank(pc);
  vocab_end_ = vocab_start_ + per_rank;
  weight_ = init.normal("weight", {padded_vocab_size, hidden_size}, init_std, {0, 1, false}, pc, options);
}

at::Tensor VocabParallelEmbedding::forward(const at::Tensor& ids) const {
  at::Tensor output;  // [b, s, h]
  if (tp_size(*pc_) == 1) {
    output = at::embedding(weight_, ids);
  } else {
    // Ids of other ranks' rows are looked up as row 0 and their output rows zeroed.
    const at::Tensor foreign = (ids < vocab_start_).logical_or(ids >= vocab_end_);
    output = at::embedding(weight_, (ids - vocab_start_).masked_fill(foreign, 0)).masked_fill(foreign.unsqueeze(-1), 0.0);
  }
  if (reduce_scatter_) return reduce_scatter_to_sequence_parallel_region(output.transpose(0, 1).contiguous(), *pc_);
  return reduce_from_tensor_parallel_region(output, *pc_);
}

void VocabParallelEmbedding::collect(const std::string& prefix, ParameterList& out, bool shared_embedding) const {
  out.add(prefix + "weight", weight_, {0, 1, false, shared_embedding});
}

}  // namespace megatron::parallel
