// ParallelState against the worked example of spec section 8 (world 16, TP 2, PP 4): every
// group in Megatron's creation order, every rank's coordinates, shard names and seeds.
#include <gtest/gtest.h>

#include "megatron/core/check.h"
#include "megatron/parallel/parallel_state.h"

namespace megatron::parallel {
namespace {

TEST(RankGenerator, MatchesMegatronGroupsForWorld16Tp2Pp4) {
  const RankGenerator gen(/*tp=*/2, /*ep=*/1, /*dp=*/2, /*pp=*/4, /*cp=*/1, "tp-cp-ep-dp-pp");
  EXPECT_EQ(gen.groups("tp"), (RankGroups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(gen.groups("dp"), (RankGroups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  EXPECT_EQ(gen.groups("dp-cp"), gen.groups("dp"));
  EXPECT_EQ(gen.groups("pp"), (RankGroups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}));
  EXPECT_EQ(gen.groups("tp-pp"), (RankGroups{{0, 1, 4, 5, 8, 9, 12, 13}, {2, 3, 6, 7, 10, 11, 14, 15}}));
  EXPECT_EQ(gen.groups("tp-dp-cp"), (RankGroups{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}}));
}

TEST(RankGenerator, TpPpDpOrderPutsPipelineBeforeData) {
  const RankGenerator gen(2, 1, 2, 4, 1, "tp-cp-ep-pp-dp");
  EXPECT_EQ(gen.groups("pp")[0], (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(gen.groups("dp")[0], (std::vector<int>{0, 8}));
}

TEST(ParallelState, CoordinatesFollowRankEqualsTpPlus2DpPlus4Pp) {
  const ParallelConfig config{16, 2, 4, 1, false};
  for (int rank = 0; rank < 16; ++rank) {
    const ParallelState ps(config, rank);
    EXPECT_EQ(ps.tp_rank(), rank % 2) << rank;
    EXPECT_EQ(ps.dp_rank(), (rank / 2) % 2) << rank;
    EXPECT_EQ(ps.pp_rank(), rank / 4) << rank;
  }
  const ParallelState r5(config, 5);
  EXPECT_EQ(r5.checkpoint_shard_name(), "mp_rank_01_001");
  EXPECT_EQ(r5.embedding_group(), (std::vector<int>{1, 13}));
  EXPECT_EQ(r5.next_pipeline_rank(), 9);
  EXPECT_EQ(r5.prev_pipeline_rank(), 1);
  EXPECT_EQ(ParallelState(config, 13).next_pipeline_rank(), 1);  // cyclic
  EXPECT_EQ(r5.default_seed(1234), 1334u);
  EXPECT_EQ(r5.model_parallel_seed(1234), 1334u + 2718u + 1u);
}

TEST(ParallelState, SingleProcessIsItsOwnEverything) {
  const ParallelState ps(ParallelConfig{}, 0);
  EXPECT_EQ(ps.dp(), 1);
  EXPECT_TRUE(ps.is_first_stage());
  EXPECT_TRUE(ps.is_last_stage());
  EXPECT_EQ(ps.checkpoint_shard_name(), "mp_rank_00");
  EXPECT_EQ(ps.embedding_group(), std::vector<int>{0});
}

TEST(ParallelState, RejectsIndivisibleWorldAndBadRank) {
  EXPECT_THROW(ParallelState(ParallelConfig{6, 4, 1, 1, false}, 0), Error);
  EXPECT_THROW(ParallelState(ParallelConfig{4, 2, 1, 1, false}, 4), Error);
  const auto problems = ParallelConfig{8, 0, 0, 1, false}.validate();
  EXPECT_EQ(problems.size(), 2u);
}

}  // namespace
}  // namespace megatron::parallel
