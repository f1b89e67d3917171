// Splitting a full tensor into TP shards and joining them back (see parallel_context.h). With
// stride k the partition dim is cut into tp * k equal pieces and rank r keeps pieces r, r + tp, ...,
// r + (k - 1) * tp, concatenated: Megatron's _initialize_affine_weight_cpu split.
#include <ATen/ATen.h>

#include "megatron/core/check.h"
#include "megatron/parallel/parallel_context.h"

namespace megatron::parallel {
namespace {

// The size of one of the tp * stride pieces along the partition dim; checks the layout.
std::int64_t piece_size(at::IntArrayRef full_shape, const TensorParallelLayout& layout, int tp_size) {
  const int dim = layout.partition_dim;
  MEGATRON_CHECK(dim < static_cast<int>(full_shape.size()), "internal error: partition dim ", dim, " of a ",
                 full_shape.size(), "-d tensor");
  MEGATRON_CHECK(layout.partition_stride >= 1, "internal error: partition stride ", layout.partition_stride);
  const std::int64_t pieces = std::int64_t{tp_size} * layout.partition_stride;
  MEGATRON_CHECK(full_shape[dim] % pieces == 0, "a tensor of size ", full_shape[dim], " along dim ", dim,
                 " cannot be split into ", tp_size, " tensor-parallel shards of stride ", layout.partition_stride);
  return full_shape[dim] / pieces;
}

std::int64_t product(at::IntArrayRef sizes) {
  std::int64_t n = 1;
  for (const std::int64_t s : sizes) n *= s;
  return n;
}

}  // namespace

at::Tensor expert_block(const at::Tensor& full, const TensorParallelLayout& layout, int ep_rank, int ep_size) {
  if (!layout.expert_parallel || ep_size == 1) return full;
  MEGATRON_CHECK(full.size(0) % ep_size == 0, "cannot split ", full.size(0), " experts over ", ep_size,
                 " expert-parallel ranks");
  const std::int64_t block = full.size(0) / ep_size;
  return full.narrow(0, ep_rank * block, block);
}

at::Tensor shard_of_full(const at::Tensor& full, const TensorParallelLayout& layout, int tp_rank, int tp_size) {
  MEGATRON_CHECK(tp_size >= 1 && tp_rank >= 0 && tp_rank < tp_size, "internal error: TP rank ", tp_rank,
                 " of ", tp_size);
  if (!layout.sharded() || tp_size == 1) return full.clone(at::MemoryFormat::Contiguous);
  const int dim = layout.partition_dim;
  const std::int64_t piece = piece_size(full.sizes(), layout, tp_size);
  std::vector<at::Tensor> mine;
  for (int k = 0; k < layout.partition_stride; ++k) {
    mine.push_back(full.narrow(dim, (std::int64_t{k} * tp_size + tp_rank) * piece, piece));
  }
  return at::cat(mine, dim).contiguous();
}

std::vector<std::int64_t> shard_shape(at::IntArrayRef full_shape, const TensorParallelLayout& layout, int tp_size) {
  std::vector<std::int64_t> shape = full_shape.vec();
  if (layout.sharded() && tp_size > 1) {
    shape[layout.partition_dim] = piece_size(full_shape, layout, tp_size) * layout.partition_stride;
  }
  return shape;
}

// Along the partition dim d, with `outer` elements before it and `inner` after: for each outer
// index and each of the rank's `stride` pieces, one run of piece x inner consecutive elements.
kernels::ShardRuns shard_runs(at::IntArrayRef full_shape, const TensorParallelLayout& layout, int tp_rank,
                              int tp_size) {
  MEGATRON_CHECK(tp_size >= 1 && tp_rank >= 0 && tp_rank < tp_size, "internal error: TP rank ", tp_rank,
                 " of ", tp_size);
  kernels::ShardRuns runs;
  if (!layout.sharded() || tp_size == 1) {
    runs.run_length = product(full_shape);
    return runs;
  }
  const int dim = layout.partition_dim;
  const std::int64_t piece = piece_size(full_shape, layout, tp_size);
  const std::int64_t inner = product(full_shape.slice(dim + 1));
  runs.runs = product(full_shape.slice(0, dim)) * layout.partition_stride;
  runs.run_length = piece * inner;
  runs.runs_per_block = layout.partition_stride;
  runs.block_stride = full_shape[dim] * inner;
  runs.run_stride = std::int64_t{tp_size} * piece * inner;
  runs.base = std::int64_t{tp_rank} * piece * inner;
  return runs;
}

at::Tensor full_from_shards(const std::vector<at::Tensor>& shards, const TensorParallelLayout& layout) {
  MEGATRON_CHECK(!shards.empty(), "internal error: no shards to join");
  if (!layout.sharded()) return shards.front().clone(at::MemoryFormat::Contiguous);
  const int dim = layout.partition_dim;
  const int stride = layout.partition_stride;
  const std::int64_t shard_size = shards.front().size(dim);
  MEGATRON_CHECK(stride >= 1 && shard_size % stride == 0, "internal error: a shard of size ", shard_size,
                 " along dim ", dim, " with partition stride ", stride);
  const std::int64_t piece = shard_size / stride;
  std::vector<at::Tensor> pieces;
  for (int k = 0; k < stride; ++k) {
    for (const auto& shard : shards) {
      MEGATRON_CHECK(shard.sizes() == shards.front().sizes(), "internal error: TP shards of different shapes ",
                     shard.sizes(), " and ", shards.front().sizes());
      pieces.push_back(shard.narrow(dim, k * piece, piece));
    }
  }
  return at::cat(pieces, dim).contiguous();
}

}  // namespace megatron::parallel
