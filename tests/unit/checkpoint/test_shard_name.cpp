// Checkpoint folder names (Megatron's mp_rank_TT[_PPP][_EEE]) of the ranks of a grid, and the
// chunk prefix of a stage's parameter names: formatted and parsed back.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "megatron/checkpoint/shard_name.h"
#include "megatron/parallel/parallel_state.h"

namespace megatron::checkpoint {
namespace {

using parallel::ParallelConfig;
using parallel::ParallelState;

std::string name_of(const ParallelConfig& config, int rank) { return ShardName::of(ParallelState(config, rank)).str(); }

TEST(ShardName, FollowsTheRanksStageAndExpertRank) {
  EXPECT_EQ(name_of(ParallelConfig{16, 2, 4, 1, false}, 5), "mp_rank_01_001");  // TP rank 1, stage 1
  EXPECT_EQ(name_of(ParallelConfig{}, 0), "mp_rank_00");
  EXPECT_EQ(name_of(ParallelConfig{8, 1, 2, 1, false, 2}, 5), "mp_rank_00_001_001");  // stage 1, EP rank 1 (Megatron's suffix)
  EXPECT_EQ((ShardName{0, 1, 2, 0, 1}.str()), "mp_rank_00_001");
  EXPECT_EQ((ShardName{1, 0, 1, 3, 4}.str()), "mp_rank_01_003");
}

// With the experts' TP size other than TP (this build's rule) the folder's TT is the larger of the
// TP and expert-TP ranks; only the (TT, EP rank) pairs the grid has exist.
TEST(ShardName, ExpertTensorParallelFolders) {
  const ParallelConfig etp1{4, 2, 1, 1, false, 2, 1};
  EXPECT_EQ(name_of(etp1, 1), "mp_rank_01_001");  // dense TP 1, experts of EP 1
  EXPECT_EQ(name_of(etp1, 2), "mp_rank_00_000");
  EXPECT_EQ(ShardName::all(ParallelState(etp1, 0)), (std::vector<std::string>{"mp_rank_00_000", "mp_rank_01_001"}));
  EXPECT_EQ(name_of(ParallelConfig{4, 2, 1, 1, false, 1, 1}, 3), "mp_rank_01");
  EXPECT_EQ(name_of(ParallelConfig{4, 1, 1, 1, false, 1, 2}, 3), "mp_rank_01");  // each expert split over two DP ranks
}

TEST(ShardName, ParsesWhatItFormats) {
  const auto n = ShardName::parse("mp_rank_03_002_001");
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->index, 3);
  EXPECT_EQ(n->more, (std::vector<int>{2, 1}));
  EXPECT_TRUE(ShardName::parse("mp_rank_00")->more.empty());
  for (const char* other : {"mp_rank_0", "mp_rank_00_01", "mp_rank_00_001_002_003", "mp_rank_00.tmp", "iter_0000010"}) {
    EXPECT_FALSE(ShardName::parse(other).has_value()) << other;
  }
}

TEST(ShardName, ChunkPrefix) {
  EXPECT_EQ(chunk_prefix(1, 2), "model1.");
  EXPECT_EQ(chunk_prefix(0, 1), "");
  EXPECT_EQ(split_chunk_prefix("model1.decoder.layers.0.mlp.linear_fc1.weight", 2),
            (std::pair<int, std::string>{1, "decoder.layers.0.mlp.linear_fc1.weight"}));
  EXPECT_EQ(split_chunk_prefix("embedding.word_embeddings.weight", 1),
            (std::pair<int, std::string>{0, "embedding.word_embeddings.weight"}));
}

}  // namespace
}  // namespace megatron::checkpoint
