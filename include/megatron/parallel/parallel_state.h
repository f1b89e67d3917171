// Where a rank sits in the TP x CP x DP x PP grid, and its process groups, exactly as Megatron's
// parallel_state / RankGenerator lays them out (spec section 8): an order string, leftmost axis
// fastest; groups as lists of global ranks in Megatron's creation order. Immutable; built once
// and passed explicitly. The experts of MoE layers have a grid of their own, as Megatron's expert
// RankGenerator builds it: tp = the expert tensor-parallel size, ep, dp = the expert
// data-parallel size (world / (etp x ep x pp)), the same pp, cp = 1, in the same order.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace megatron::parallel {

using RankGroups = std::vector<std::vector<int>>;

// Megatron's RankGenerator: axes tp, cp, ep, dp, pp in the order of `order` ("tp-cp-ep-dp-pp" or
// "tp-cp-ep-pp-dp").
class RankGenerator {
 public:
  RankGenerator(int tp, int ep, int dp, int pp, int cp, const std::string& order);

  // All groups for a token set such as "tp", "dp", "dp-cp", "tp-pp", "tp-dp-cp": each group holds
  // the ranks that share every coordinate of the other axes.
  RankGroups groups(const std::string& tokens) const;

  int world_size() const { return world_; }

 private:
  std::vector<std::string> names_;
  std::vector<int> sizes_;
  int world_ = 1;
};

struct ParallelConfig {
  int world_size = 1;
  int tp = 1;
  int pp = 1;
  int cp = 1;
  bool tp_pp_dp_order = false;  // --use-tp-pp-dp-mapping
  int ep = 1;                   // --expert-model-parallel-size
  int etp = 0;                  // --expert-tensor-parallel-size; 0: tp

  // Every problem with these sizes (world not divisible, non-positive sizes, ...).
  std::vector<std::string> validate() const;
  int dp() const { return world_size / (tp * pp * cp); }
  int expert_tp() const { return etp > 0 ? etp : tp; }
  int expert_dp() const { return world_size / (expert_tp() * ep * pp); }
  std::string order() const { return tp_pp_dp_order ? "tp-cp-ep-pp-dp" : "tp-cp-ep-dp-pp"; }
};

class ParallelState {
 public:
  // Throws megatron::Error listing every problem of `config` or a rank outside the world.
  ParallelState(const ParallelConfig& config, int rank);

  const ParallelConfig& config() const { return config_; }
  int rank() const { return rank_; }
  int world_size() const { return config_.world_size; }
  int tp() const { return config_.tp; }
  int pp() const { return config_.pp; }
  int cp() const { return config_.cp; }
  int dp() const { return config_.dp(); }
  int tp_rank() const { return tp_rank_; }
  int pp_rank() const { return pp_rank_; }
  int dp_rank() const { return dp_rank_; }
  int cp_rank() const { return cp_rank_; }
  bool is_first_stage() const { return pp_rank_ == 0; }
  bool is_last_stage() const { return pp_rank_ == config_.pp - 1; }

  // This rank's groups (global ranks, Megatron's order).
  const std::vector<int>& tp_group() const { return tp_group_; }
  const std::vector<int>& pp_group() const { return pp_group_; }
  const std::vector<int>& dp_group() const { return dp_group_; }
  const std::vector<int>& dp_cp_group() const { return dp_cp_group_; }
  const std::vector<int>& model_parallel_group() const { return mp_group_; }
  // The experts' grid: this rank's coordinates and groups in it.
  int ep() const { return config_.ep; }
  int expert_tp() const { return config_.expert_tp(); }
  // Checkpoint folders per stage and EP rank: max(TP, expert TP) (one divides the other).
  int checkpoint_shards() const { return std::max(config_.tp, config_.expert_tp()); }
  int expert_dp() const { return config_.expert_dp(); }
  int ep_rank() const { return ep_rank_; }
  int expert_tp_rank() const { return expert_tp_rank_; }
  int expert_dp_rank() const { return expert_dp_rank_; }
  const std::vector<int>& ep_group() const { return ep_group_; }
  const std::vector<int>& expert_tp_group() const { return expert_tp_group_; }
  const std::vector<int>& expert_dp_group() const { return expert_dp_group_; }           // expert gradients
  const std::vector<int>& expert_tp_ep_group() const { return expert_tp_ep_group_; }     // the dispatchers
  const std::vector<int>& expert_model_parallel_group() const { return expert_mp_group_; }  // tp-ep-pp
  // {first, last} stage of this rank's pipeline ({first} when pp == 1).
  const std::vector<int>& embedding_group() const { return embedding_group_; }
  int next_pipeline_rank() const;  // cyclic neighbours in the pp group
  int prev_pipeline_rank() const;

  // The checkpoint shard index (checkpoint::ShardName names the folders): the TP rank, or where
  // the experts are split finer than the dense layers (expert TP > TP) the expert TP rank.
  int checkpoint_shard_index() const;
  // The ranks that share this rank's checkpoint folder (ascending; rank 0 of it writes the model),
  // and those groups for the whole world: the same shard index, pipeline stage and EP rank. With
  // expert TP = TP this is the expert-data-parallel group.
  const std::vector<int>& checkpoint_shard_group() const { return checkpoint_shard_group_; }
  RankGroups checkpoint_shard_groups() const;
  // Every rank's (shard index, pipeline rank, EP rank).
  std::vector<std::array<int, 3>> checkpoint_shards_of_ranks() const;

  // Seeds (spec 8): the default generator's seed = seed + 100 * pp_rank; the model-parallel
  // tracker's = that + 2718 + tp_rank.
  std::uint64_t default_seed(std::uint64_t seed) const;
  std::uint64_t model_parallel_seed(std::uint64_t seed) const;
  // The expert-parallel tracker's: the default seed + 1024 + 100 * ep_rank + expert tp_rank.
  std::uint64_t expert_parallel_seed(std::uint64_t seed) const;

 private:
  ParallelConfig config_;
  int rank_;
  int tp_rank_ = 0, pp_rank_ = 0, dp_rank_ = 0, cp_rank_ = 0;
  int ep_rank_ = 0, expert_tp_rank_ = 0, expert_dp_rank_ = 0;
  std::vector<int> tp_group_, pp_group_, dp_group_, dp_cp_group_, mp_group_, embedding_group_;
  std::vector<int> ep_group_, expert_tp_group_, expert_dp_group_, expert_tp_ep_group_, expert_mp_group_;
  std::vector<int> checkpoint_shard_group_;
};

}  // namespace megatron::parallel
