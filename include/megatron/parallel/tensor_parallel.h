// Megatron's tensor-parallel layers over LibTorch (ATen ops, autograd through them): column- and
// row-parallel linear layers, the vocab-parallel embedding and cross entropy. Each rank holds its
// shard (output rows for column-parallel, input columns for row-parallel, vocab rows for the
// embedding); communication happens only in the regions of mappings.h. Initialisation is
// layout-invariant: each layer draws only this rank's shard of its weight, on the run's device,
// from the counter-based stream of its name (parameter_init.h), so every layout holds the single
// process's weights. Biases start at 0.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <string>
#include <utility>
#include <vector>

#include "megatron/parallel/mappings.h"
#include "megatron/parallel/parallel_context.h"
#include "megatron/parallel/parameter_init.h"

namespace megatron::parallel {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Parameters in a fixed order with their Megatron names and their TP layouts (aligned).
struct ParameterList {
  NamedTensors named;
  std::vector<TensorParallelLayout> layouts;
  // Persistent buffers: state saved in checkpoints beside the parameters, replicated over TP, with
  // no gradient (the routers' expert biases).
  NamedTensors buffers;

  void add(std::string name, const at::Tensor& t, const TensorParallelLayout& layout = {});
  void add_buffer(std::string name, const at::Tensor& t) { buffers.emplace_back(std::move(name), t); }
};

// This rank's position in, and the size of, the context's TP group.
int tp_rank(const ParallelContext& pc);
int tp_size(const ParallelContext& pc);
// The same for the expert-tensor-parallel group, which splits each expert (the TP group where the
// context has none).
const ProcessGroup& expert_tp_group(const ParallelContext& pc);
int expert_tp_rank(const ParallelContext& pc);
int expert_tp_size(const ParallelContext& pc);


struct LinearOptions {
  bool bias = true;
  int partition_stride = 1;        // column-parallel: 2 for SwiGLU's fc1, whose full weight is [gate; up]
  bool gather_output = false;      // column-parallel: all-gather the output along its last dim
  bool skip_bias_add = false;      // column-parallel: forward leaves the bias to the caller (a fused
                                   // bias-activation), as Megatron's skip_bias_add
  bool input_is_parallel = true;   // row-parallel: the input is already split along its last dim
  bool sequence_parallel = false;  // activations outside the layer are [s/tp, b, h]
  at::TensorOptions tensor_options = {};  // the parameters' device and dtype
};

// y = x W^T (+ b) with W [out/tp, in] this rank's rows of the full weight: the input enters
// through copy_to (or, with sequence parallelism, is all-gathered along s), the output is this
// rank's columns [..., out/tp] (or all of them with gather_output). Used by the layer below and
// by the GPT output layer, whose weight may be the word embedding's.
at::Tensor column_parallel_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                  const ParallelContext& pc, bool sequence_parallel, bool gather_output);

// The layers draw their weight as init's "weight" (init scoped to the layer's name, the prefix
// collect() is given where the model is one process).
class ColumnParallelLinear {
 public:
  ColumnParallelLinear(int in_features, int out_features, double init_std, const ParameterInit& init,
                       const ParallelContext& pc, const LinearOptions& options = {});
  // [s(/tp), b, in] -> [s, b, out/tp] ([..., in] -> [..., out/tp] without sequence parallelism);
  // without the bias when skip_bias_add.
  at::Tensor forward(const at::Tensor& x) const;
  // weight: partition dim 0 (with the stride); bias: the same.
  void collect(const std::string& prefix, ParameterList& out) const;
  const at::Tensor& weight() const { return weight_; }
  const at::Tensor& bias() const { return bias_; }  // undefined without bias

 private:
  const ParallelContext* pc_;
  LinearOptions options_;
  at::Tensor weight_, bias_;
};

class RowParallelLinear {
 public:
  // W [out, in/tp]; b [out] is added after the reduction by the caller (bias-dropout-add), as in
  // Megatron, so forward returns the un-biased output. Sequence parallelism needs input_is_parallel.
  RowParallelLinear(int in_features, int out_features, double init_std, const ParameterInit& init,
                    const ParallelContext& pc, const LinearOptions& options = {});
  // [..., in/tp] -> [..., out] reduced over TP; with sequence parallelism [s, b, in/tp] ->
  // [s/tp, b, out] reduce-scattered along s.
  at::Tensor forward(const at::Tensor& x) const;
  const at::Tensor& bias() const { return bias_; }  // undefined without bias
  // weight: partition dim 1; bias: replicated (sequence_parallel under sequence parallelism).
  void collect(const std::string& prefix, ParameterList& out) const;

 private:
  const ParallelContext* pc_;
  LinearOptions options_;
  at::Tensor weight_, bias_;
};

class VocabParallelEmbedding {
 public:
  // Weight [V_pad/tp, h]: rows [tp_rank * V_pad/tp, (tp_rank + 1) * V_pad/tp) of the full table.
  VocabParallelEmbedding(std::int64_t padded_vocab_size, int hidden_size, double init_std, const ParameterInit& init,
                         const ParallelContext& pc, bool reduce_scatter_embeddings = false,
                         const at::TensorOptions& options = {});
  // ids [b, s] -> [b, s, h] all-reduced over TP; with reduce_scatter_embeddings ->
  // [s/tp, b, h] (transposed to sequence-first, then reduce-scattered along s).
  at::Tensor forward(const at::Tensor& ids) const;
  const at::Tensor& weight() const { return weight_; }
  // Partition dim 0; `shared_embedding` marks it tied to an output layer on another stage.
  void collect(const std::string& prefix, ParameterList& out, bool shared_embedding = false) const;

 private:
  const ParallelContext* pc_;
  bool reduce_scatter_;
  at::Tensor weight_;  // [V_pad/tp, h]
  std::int64_t vocab_start_ = 0, vocab_end_ = 0;
};

// Per-token cross entropy of vocab-sharded logits [s, b, V_pad/tp] (any float dtype) against
// targets [s, b] (full vocabulary ids), in fp32 without gathering the logits (spec 10.7): every
// rank's (max, sum of exponentials, target logit) packed into ONE SUM all-reduce over TP. Returns
// [s, b] fp32, equal on every TP rank. Backward: softmax minus one-hot on the owning rank, times
// the incoming gradient, recomputed from the logits in their dtype.
at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits, const at::Tensor& targets,
                                        const ParallelContext& pc);

}  // namespace megatron::parallel
