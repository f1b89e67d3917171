// What parallel code needs besides the tensors: where this rank sits (ParallelState), the
// communicator, this rank's process groups, and how each parameter is laid out over the
// tensor-parallel group. Built once at start-up (collectively) and passed explicitly.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "megatron/kernels/shard_runs.h"
#include "megatron/parallel/communicator.h"
#include "megatron/parallel/parallel_state.h"

namespace megatron::parallel {

struct ParallelContext {
  const ParallelState* state = nullptr;
  Communicator* comm = nullptr;
  std::shared_ptr<ProcessGroup> tp;         // tensor-model-parallel
  std::shared_ptr<ProcessGroup> dp;         // data-parallel
  std::shared_ptr<ProcessGroup> dp_cp;      // data-parallel x context-parallel (gradient reduction)
  std::shared_ptr<ProcessGroup> cp;         // context-parallel: the ranks sharing one sequence
  std::shared_ptr<ProcessGroup> mp;         // model-parallel (tp x pp): gradient norm, found-inf
  std::shared_ptr<ProcessGroup> pp;         // pipeline-model-parallel
  std::shared_ptr<ProcessGroup> embedding;  // first and last pipeline stage
  std::shared_ptr<ProcessGroup> ep;         // expert-model-parallel: the ranks splitting a layer's experts
  std::shared_ptr<ProcessGroup> expert_dp;  // expert-data-parallel: the ranks holding the same experts
  std::shared_ptr<ProcessGroup> tp_ep;      // expert tensor x expert model parallel: the allgather dispatcher's
  std::shared_ptr<ProcessGroup> expert_tp;  // expert-tensor-parallel: the ranks splitting each expert (tp when equal)
  // The ranks writing one checkpoint folder (ParallelState::checkpoint_shard_group; expert_dp when
  // the expert TP size is the TP size).
  std::shared_ptr<ProcessGroup> checkpoint_shard;
  std::shared_ptr<ProcessGroup> world;

  // Collective over the world: makes every group kind in Megatron's creation order.
  static ParallelContext create(const ParallelState& state, Communicator& comm);
};

// How a parameter is laid out over the tensor-parallel group (Megatron's tensor_model_parallel,
// partition_dim, partition_stride and sequence_parallel attributes).
struct TensorParallelLayout {
  // -1: every TP rank holds the same full tensor; 0 or 1: each holds its block along that dim.
  int partition_dim = -1;
  // Blocks per rank along partition_dim: 1 = one contiguous block; 2 = SwiGLU's fc1, whose full
  // weight is [gate; up] and whose shard on rank r is [gate block r; up block r].
  int partition_stride = 1;
  // Replicated over TP but fed by this rank's share of the sequence (norms under
  // --sequence-parallel): its gradient is summed over TP before the optimizer step.
  bool sequence_parallel = false;
  // The word embedding on the first pipeline stage or its copy, the output layer, on the last
  // (tied embeddings with PP > 1): their gradients are summed over the embedding group, and the
  // data-parallel buffer gives them a bucket of their own so that both stages shard them alike.
  bool shared_embedding = false;
  // An MoE layer's expert weights [E, ...]: the experts (dim 0) are split over the expert-parallel
  // group, each rank holding E/EP whole experts (split again over TP as partition_dim says); the
  // gradient is averaged over the expert-data-parallel group, in a buffer of its own.
  bool expert_parallel = false;

  bool sharded() const { return partition_dim >= 0; }
};

// Expert-parallel rank `ep_rank`'s part of a full tensor: its block of E/EP experts (dim 0) for a
// tensor whose layout is expert_parallel, the whole tensor otherwise (a view). Throws
// megatron::Error when the experts do not split evenly.
at::Tensor expert_block(const at::Tensor& full, const TensorParallelLayout& layout, int ep_rank, int ep_size);
// This TP rank's shard of a full tensor (a contiguous copy).
at::Tensor shard_of_full(const at::Tensor& full, const TensorParallelLayout& layout, int tp_rank, int tp_size);
// The shape of that shard, and where its elements (in order) sit in the full tensor, without the
// full tensor: what a rank needs to draw its shard of a counter-based stream directly.
std::vector<std::int64_t> shard_shape(at::IntArrayRef full_shape, const TensorParallelLayout& layout, int tp_size);
kernels::ShardRuns shard_runs(at::IntArrayRef full_shape, const TensorParallelLayout& layout, int tp_rank,
                              int tp_size);
// The full tensor from every TP rank's shard, in TP rank order (inverse of shard_of_full).
at::Tensor full_from_shards(const std::vector<at::Tensor>& shards, const TensorParallelLayout& layout);

}  // namespace megatron::parallel
