// shard_of_full / full_from_shards: Megatron's split of a full tensor into TP shards along the
// partition dim, with stride 2 for SwiGLU's [gate; up], and the inverse join.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "megatron/core/check.h"
#include "megatron/parallel/parallel_context.h"

namespace megatron::parallel {
namespace {

TEST(TensorParallelLayout, ShardsAreContiguousBlocksAlongThePartitionDim) {
  const at::Tensor full = at::arange(24, at::kFloat).view({6, 4});
  EXPECT_TRUE(at::equal(shard_of_full(full, {0, 1, false}, 1, 3), full.narrow(0, 2, 2)));
  EXPECT_TRUE(at::equal(shard_of_full(full, {1, 1, false}, 1, 2), full.narrow(1, 2, 2)));
  EXPECT_TRUE(shard_of_full(full, {1, 1, false}, 0, 2).is_contiguous());
  EXPECT_TRUE(at::equal(shard_of_full(full, {}, 1, 2), full));  // replicated: the whole tensor
}

TEST(TensorParallelLayout, StrideTwoKeepsOneBlockOfEachHalf) {
  // [gate; up] = [0 1 2 3 | 4 5 6 7]: rank 0 keeps gate block 0 and up block 0.
  const at::Tensor full = at::arange(8, at::kFloat).view({8, 1});
  EXPECT_TRUE(at::equal(shard_of_full(full, {0, 2, false}, 0, 2).flatten(), at::tensor({0.f, 1.f, 4.f, 5.f})));
  EXPECT_TRUE(at::equal(shard_of_full(full, {0, 2, false}, 1, 2).flatten(), at::tensor({2.f, 3.f, 6.f, 7.f})));
}

TEST(TensorParallelLayout, FullFromShardsInvertsShardOfFull) {
  const at::Tensor full = at::randn({8, 16});
  for (int dim : {0, 1}) {
    for (int stride : {1, 2}) {
      for (int tp : {1, 2, 4}) {
        const TensorParallelLayout layout{dim, stride, false};
        std::vector<at::Tensor> shards;
        for (int r = 0; r < tp; ++r) shards.push_back(shard_of_full(full, layout, r, tp));
        EXPECT_TRUE(at::equal(full_from_shards(shards, layout), full))
            << "dim " << dim << " stride " << stride << " tp " << tp;
      }
    }
  }
}

TEST(TensorParallelLayout, RejectsSizesNotDivisibleByTheShards) {
  const at::Tensor full = at::zeros({6, 4});
  EXPECT_THROW(shard_of_full(full, {0, 1, false}, 0, 4), Error);
  EXPECT_THROW(shard_of_full(full, {0, 2, false}, 0, 2), Error);
}

}  // namespace
}  // namespace megatron::parallel
