// ParallelState against the worked example of spec section 8 (world 16, TP 2, PP 4): every
// group in Megatron's creation order, every rank's coordinates, checkpoint shards and seeds.
#include <gtest/gtest.h>

#include <string>
#include <vector>

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
  EXPECT_EQ(r5.embedding_group(), (std::vector<int>{1, 13}));
  EXPECT_EQ(r5.next_pipeline_rank(), 9);
  EXPECT_EQ(r5.prev_pipeline_rank(), 1);
  EXPECT_EQ(ParallelState(config, 13).next_pipeline_rank(), 1);  // cyclic
  EXPECT_EQ(r5.default_seed(1234), 1334u);
  EXPECT_EQ(r5.model_parallel_seed(1234), 1334u + 2718u + 1u);
}

// The experts' grid against megatron-core 0.12's own RankGenerator (the lists below are what it
// returned for these sizes): tp = ETP, ep, dp = EDP, the same pp, cp = 1.
TEST(ParallelState, ExpertGridMatchesMegatronsExpertRankGenerator) {
  // 8 ranks, TP = ETP 2, EP 4: EP [0,2,4,6] [1,3,5,7], ETP [0,1] ..., EDP of one rank each.
  ParallelConfig tp2_ep4{8, 2, 1, 1, false, 4};
  for (int rank = 0; rank < 8; ++rank) {
    const ParallelState ps(tp2_ep4, rank);
    EXPECT_EQ(ps.ep_group(), rank % 2 == 0 ? (std::vector<int>{0, 2, 4, 6}) : (std::vector<int>{1, 3, 5, 7})) << rank;
    EXPECT_EQ(ps.expert_tp_group(), (std::vector<int>{rank / 2 * 2, rank / 2 * 2 + 1})) << rank;
    EXPECT_EQ(ps.expert_dp_group(), std::vector<int>{rank}) << rank;
    EXPECT_EQ(ps.expert_tp_ep_group(), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7})) << rank;
    EXPECT_EQ(ps.ep_rank(), rank / 2) << rank;
    EXPECT_EQ(ps.expert_dp(), 1);
  }
  // 8 ranks, TP 1, EP 2, PP 2: EP [0,1] [2,3] [4,5] [6,7], EDP [0,2] [1,3] [4,6] [5,7],
  // tp-ep-pp [0,1,4,5] [2,3,6,7].
  const ParallelConfig ep2_pp2{8, 1, 2, 1, false, 2};
  const ParallelState r5(ep2_pp2, 5);
  EXPECT_EQ(r5.ep_group(), (std::vector<int>{4, 5}));
  EXPECT_EQ(r5.expert_dp_group(), (std::vector<int>{5, 7}));
  EXPECT_EQ(r5.expert_model_parallel_group(), (std::vector<int>{0, 1, 4, 5}));
  EXPECT_EQ(r5.ep_rank(), 1);
  EXPECT_EQ(r5.expert_dp_rank(), 0);
  EXPECT_EQ(r5.expert_parallel_seed(1234), 1334u + 1024u + 100u);
  // TP 2 with ETP 1, EP 2 on 4 ranks: EP [0,1] [2,3], EDP [0,2] [1,3].
  ParallelConfig etp1{4, 2, 1, 1, false, 2, 1};
  EXPECT_EQ(ParallelState(etp1, 2).ep_group(), (std::vector<int>{2, 3}));
  EXPECT_EQ(ParallelState(etp1, 1).expert_dp_group(), (std::vector<int>{1, 3}));
  // Checkpoint folders with the experts' TP size other than TP (this build's rule): one folder per
  // shard index (the TP rank, or the expert-TP rank where that is larger), stage and EP rank,
  // written by the ranks sharing it (their names: test_shard_name.cpp).
  EXPECT_EQ(ParallelState(etp1, 0).checkpoint_shard_groups(), (RankGroups{{0, 2}, {1, 3}}));
  const ParallelConfig tp2_etp1_ep1{4, 2, 1, 1, false, 1, 1};  // the experts whole on every rank
  EXPECT_EQ(ParallelState(tp2_etp1_ep1, 3).checkpoint_shard_group(), (std::vector<int>{1, 3}));
  EXPECT_EQ(ParallelState(tp2_etp1_ep1, 3).expert_dp_group(), (std::vector<int>{0, 1, 2, 3}));
  const ParallelConfig tp1_etp2{4, 1, 1, 1, false, 1, 2};  // each expert split over two DP ranks
  const ParallelState r3(tp1_etp2, 3);
  EXPECT_EQ(r3.checkpoint_shards(), 2);
  EXPECT_EQ(r3.checkpoint_shard_index(), 1);
  EXPECT_EQ(r3.checkpoint_shard_groups(), (RankGroups{{0, 2}, {1, 3}}));
  // With the experts' TP size TP the folder's writers are the expert-data-parallel group.
  for (const ParallelConfig& c : {ParallelConfig{8, 2, 2, 1, false, 2}, ParallelConfig{8, 1, 1, 2, false, 2},
                                  ParallelConfig{8, 2, 1, 1, true, 1}}) {
    for (int r = 0; r < 8; ++r) {
      const ParallelState ps(c, r);
      EXPECT_EQ(ps.checkpoint_shard_group(), ps.expert_dp_group()) << r;
      EXPECT_EQ(ps.checkpoint_shard_index(), ps.tp_rank());
    }
  }
  const std::vector<std::string> uneven = ParallelConfig{6, 2, 1, 1, false, 1, 3}.validate();
  ASSERT_EQ(uneven.size(), 1u);
  EXPECT_EQ(uneven[0], "--expert-tensor-parallel-size 3 must divide --tensor-model-parallel-size 2 or be a multiple of it");
  // Megatron's RuntimeError when the experts' grid does not divide the world.
  const ParallelConfig indivisible{6, 1, 1, 1, false, 4};
  const std::vector<std::string> problems = indivisible.validate();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], "decoder world_size (6) is not divisible by expert_tensor_model_pipeline_parallel size (4)");
}

TEST(ParallelState, SingleProcessIsItsOwnEverything) {
  const ParallelState ps(ParallelConfig{}, 0);
  EXPECT_EQ(ps.dp(), 1);
  EXPECT_TRUE(ps.is_first_stage());
  EXPECT_TRUE(ps.is_last_stage());
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
