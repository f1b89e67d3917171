// Parameter initialisation that every layout agrees on, without anyone drawing the whole model.
// A parameter's values form a counter-based stream (kernels/aten/init_ops.h) keyed by the run's
// seed and the parameter's layout-free name ("decoder.layers.17.mlp.linear_fc1.weight", the
// global layer number): element i of the full tensor is the same whichever rank draws it, in
// whatever order. So each rank draws exactly its TP shard of the layers its pipeline stage holds,
// on its own device, and the gathered shards of any TP x PP x DP layout are bit for bit the single
// process's full weights.
// Megatron differs: with --use-cpu-initialization every rank draws each full weight on the CPU
// and keeps its slice (layout-invariant, but time and memory grow with the whole model); without
// it each rank draws its shard on the GPU from a per-rank seed (fast, but another TP or PP size
// starts from other weights). Keying by name gives both.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "megatron/parallel/parallel_context.h"

namespace megatron::parallel {

class ParameterInit {
 public:
  explicit ParameterInit(std::uint64_t seed) : seed_(seed) {}
  // Parameters allocated but not drawn (their memory is left as it is): for a model whose every
  // value is loaded next (a checkpoint or HuggingFace folder read whole).
  static ParameterInit loaded_later();

  // The same seed with `prefix` put before every name (a module's place in the model).
  ParameterInit scope(std::string_view prefix) const;

  // This TP rank's shard of the parameter `name` (full shape `full_shape`): N(0, std) values of
  // the stream (zeros for std == 0), made on `options`' device in fp32 and cast to its dtype, a
  // leaf that requires grad.
  at::Tensor normal(std::string_view name, at::IntArrayRef full_shape, double std,
                    const TensorParallelLayout& layout, const ParallelContext& pc,
                    const at::TensorOptions& options) const;

  // The same for an MoE layer's expert weight [E, ...] (layout.expert_parallel): this rank's E/EP
  // experts, block `ep_rank` of `ep` along dim 0, and of that block this expert-TP rank's shard
  // (expert_tp_rank / expert_tp_size).
  at::Tensor normal_experts(std::string_view name, at::IntArrayRef full_shape, double std,
                            const TensorParallelLayout& layout, int ep_rank, int ep, const ParallelContext& pc,
                            const at::TensorOptions& options) const;

  // The whole parameter as one fp32 CPU tensor (what the single process holds): for references.
  at::Tensor full(std::string_view name, at::IntArrayRef full_shape, double std) const;

  // The stream's key: the seed mixed with the full name's 64-bit FNV-1a hash (splitmix64).
  std::uint64_t key(std::string_view name) const;

 private:
  ParameterInit(std::uint64_t seed, std::string prefix, bool draws)
      : seed_(seed), prefix_(std::move(prefix)), draws_(draws) {}
  // The TP shard of a `shape` tensor that starts at element `base` of the full one.
  at::Tensor draw(std::string_view name, at::IntArrayRef shape, double std, const TensorParallelLayout& layout,
                  int tp_rank, int tp_size, std::int64_t base, const at::TensorOptions& options) const;

  std::uint64_t seed_;
  std::string prefix_;
  bool draws_ = true;
};

// A leaf parameter of zeros: this TP rank's shard of a `full_shape` tensor, made on `options`'
// device in its dtype (biases).
at::Tensor zeros_parameter(at::IntArrayRef full_shape, const TensorParallelLayout& layout, const ParallelContext& pc,
                           const at::TensorOptions& options);

}  // namespace megatron::parallel
