// Megatron's tensor-parallel building blocks over LibTorch (ATen ops, autograd through them):
// column- and row-parallel linear layers, the vocab-parallel embedding and cross entropy. Each
// rank holds its shard (output rows for column-parallel, input columns for row-parallel, vocab
// rows for the embedding). Communication happens only in the regions (copy_to / reduce_from the
// TP group); this build runs them at TP size 1, where they are the identity, and rejects larger
// sizes until the Communicator arrives.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <string>
#include <utility>
#include <vector>

#include "megatron/parallel/parallel_state.h"

namespace megatron::parallel {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Normal(0, std) initialisation from an explicit generator; zeros for std == 0.
void init_normal(at::Tensor& t, double std, at::Generator& gen);

// Creates an fp32 leaf tensor that requires grad.
at::Tensor make_parameter(at::IntArrayRef shape);

// Forward: identity; backward: all-reduce over TP.
at::Tensor copy_to_tensor_parallel_region(const at::Tensor& x, const ParallelState& ps);
// Forward: all-reduce over TP; backward: identity.
at::Tensor reduce_from_tensor_parallel_region(const at::Tensor& x, const ParallelState& ps);

class ColumnParallelLinear {
 public:
  // y = x W^T (+ b); W [out/tp, in], b [out/tp].
  ColumnParallelLinear(int in_features, int out_features, bool bias, double init_std,
                       at::Generator& gen, const ParallelState& ps);
  at::Tensor forward(const at::Tensor& x) const;  // [..., in] -> [..., out/tp]
  void collect(const std::string& prefix, NamedTensors& out) const;
  at::Tensor& weight() { return weight_; }

 private:
  const ParallelState* ps_;
  at::Tensor weight_, bias_;
};

class RowParallelLinear {
 public:
  // W [out, in/tp], b [out] added after the reduction. forward returns the un-biased output;
  // the caller adds bias() in its bias-dropout-add, as Megatron does.
  RowParallelLinear(int in_features, int out_features, bool bias, double init_std,
                    at::Generator& gen, const ParallelState& ps);
  at::Tensor forward(const at::Tensor& x) const;  // [..., in/tp] -> [..., out]
  const at::Tensor& bias() const { return bias_; }  // undefined without bias
  void collect(const std::string& prefix, NamedTensors& out) const;

 private:
  const ParallelState* ps_;
  at::Tensor weight_, bias_;
};

class VocabParallelEmbedding {
 public:
  VocabParallelEmbedding(std::int64_t padded_vocab_size, int hidden_size, double init_std,
                         at::Generator& gen, const ParallelState& ps);
  at::Tensor forward(const at::Tensor& ids) const;  // [b, s] -> [b, s, h]
  const at::Tensor& weight() const { return weight_; }
  void collect(const std::string& prefix, NamedTensors& out) const;

 private:
  const ParallelState* ps_;
  at::Tensor weight_;  // [V_pad/tp, h]
  std::int64_t vocab_start_ = 0, vocab_end_ = 0;
};

// Per-token cross entropy of vocab-sharded logits [s, b, V_pad/tp] against targets [s, b],
// in fp32 (spec 10.7). Returns [s, b].
at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits, const at::Tensor& targets,
                                        const ParallelState& ps);

}  // namespace megatron::parallel
