// Splitting a full tensor into TP shards and joining them back (see parallel_context.h). With
// stride k the partition dim is cut into tp * k equal pieces and rank r keeps pieces r, r + tp, ...,
// r + (k - 1) * tp, concatenated: Megatron's _initialize_affine_weight_cpu split.
#include <ATen/ATen.h>

#include "megatron/core/check.h"
#include "megatron/parallel/parallel_context.h"

namespace megatron::parallel {
namespace {

// The size of one of the tp * stride pieces along the partition dim; checks the layout.
std::int64_t piece_size(const at::Tensor& full, const TensorParallelLayout& layout, int tp_size) {
  const int dim = layout.partition_dim;
  MEGATRON_CHECK(dim < full.dim(), "internal error: partition dim ", dim, " of a ", full.dim(), "-d tensor");
  MEGATRON_CHECK(layout.partition_stride >= 1, "internal error: partition stride ", layout.partition_stride);
  const std::int64_t pieces = std::int64_t{tp_size} * layout.partition_stride;
  MEGATRON_CHECK(full.size(dim) % pieces == 0, "a tensor of size ", full.size(dim), " along dim ", dim,
                 " cannot be split into ", tp_size, " tensor-parallel shards of stride ", layout.partition_stride);
  return full.size(dim) / pieces;
}

}  // namespace

at::Tensor shard_of_full(const at::Tensor& full, const TensorParallelLayout& layout, int tp_rank, int tp_size) {
  MEGATRON_CHECK(tp_size >= 1 && tp_rank >= 0 && tp_rank < tp_size, "internal error: TP rank ", tp_rank,
                 " of ", tp_size);
  if (!layout.sharded() || tp_size == 1) return full.clone(at::MemoryFormat::Contiguous);
  const int dim = layout.partition_dim;
  const std::int64_t piece = piece_size(full, layout, tp_size);
  std::vector<at::Tensor> mine;
  for (int k = 0; k < layout.partition_stride; ++k) {
    mine.push_back(full.narrow(dim, (std::int64_t{k} * tp_size + tp_rank) * piece, piece));
  }
  return at::cat(mine, dim).contiguous();
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
