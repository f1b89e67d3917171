// Rank grid and groups (see parallel_state.h): strides are prefix products of the axis sizes in
// order; a group is enumerated over the masked axes with the other coordinates fixed.
#include "megatron/parallel/parallel_state.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <array>
#include <map>
#include <sstream>

#include "megatron/core/check.h"

namespace megatron::parallel {
namespace {

std::vector<std::string> split_tokens(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string token; std::getline(in, token, '-');) out.push_back(token);
  return out;
}

const std::vector<int>& group_of(const RankGroups& groups, int rank) {
  for (const auto& g : groups) {
    if (std::find(g.begin(), g.end(), rank) != g.end()) return g;
  }
  MEGATRON_FAIL("internal error: rank ", rank, " is in no group");
}

int position_in(const std::vector<int>& group, int rank) {
  return static_cast<int>(std::find(group.begin(), group.end(), rank) - group.begin());
}

}  // namespace

RankGenerator::RankGenerator(int tp, int ep, int dp, int pp, int cp, const std::string& order) {
  const std::vector<std::pair<std::string, int>> axes = {{"tp", tp}, {"cp", cp}, {"ep", ep}, {"dp", dp}, {"pp", pp}};
  for (const auto& name : split_tokens(order)) {
    const auto it = std::find_if(axes.begin(), axes.end(), [&](const auto& a) { return a.first == name; });
    MEGATRON_CHECK(it != axes.end(), "unknown parallel axis '", name, "' in order ", order);
    names_.push_back(name);
    sizes_.push_back(it->second);
    world_ *= it->second;
  }
  MEGATRON_CHECK(names_.size() == axes.size(), "parallel order ", order, " must name tp, cp, ep, dp and pp once each");
}

RankGroups RankGenerator::groups(const std::string& tokens) const {
  const auto wanted = split_tokens(tokens);
  std::vector<bool> masked(names_.size(), false);
  for (const auto& t : wanted) {
    const auto it = std::find(names_.begin(), names_.end(), t);
    MEGATRON_CHECK(it != names_.end(), "unknown parallel axis '", t, "'");
    masked[static_cast<std::size_t>(it - names_.begin())] = true;
  }
  std::vector<int> stride(names_.size(), 1);
  for (std::size_t i = 1; i < names_.size(); ++i) stride[i] = stride[i - 1] * sizes_[i - 1];
  int masked_count = 1, unmasked_count = 1;
  for (std::size_t i = 0; i < names_.size(); ++i) (masked[i] ? masked_count : unmasked_count) *= sizes_[i];

  // Decompose an index over a subset of axes into coordinates, leftmost axis fastest.
  auto rank_of = [&](int outer, int inner) {
    int rank = 0;
    for (std::size_t i = 0; i < names_.size(); ++i) {
      int& index = masked[i] ? inner : outer;
      rank += (index % sizes_[i]) * stride[i];
      index /= sizes_[i];
    }
    return rank;
  };
  RankGroups groups;
  for (int g = 0; g < unmasked_count; ++g) {
    std::vector<int> group;
    for (int m = 0; m < masked_count; ++m) group.push_back(rank_of(g, m));
    groups.push_back(std::move(group));
  }
  return groups;
}

std::vector<std::string> ParallelConfig::validate() const {
  std::vector<std::string> problems;
  if (tp < 1) problems.push_back("--tensor-model-parallel-size must be at least 1");
  if (pp < 1) problems.push_back("--pipeline-model-parallel-size must be at least 1");
  if (cp < 1) problems.push_back("--context-parallel-size must be at least 1");
  if (world_size < 1) problems.push_back("the world size must be at least 1");
  if (problems.empty() && world_size % (tp * pp * cp) != 0) {
    problems.push_back(str_cat("world size ", world_size, " is not divisible by tensor (", tp,
                               ") x pipeline (", pp, ") x context (", cp, ") parallel sizes"));
  }
  if (ep < 1) problems.push_back("--expert-model-parallel-size must be at least 1");
  if (etp < 0) problems.push_back("--expert-tensor-parallel-size must be at least 1");
  // Each checkpoint folder then holds one dense and one expert shard (checkpoint_shard_index).
  if (problems.empty() && tp % expert_tp() != 0 && expert_tp() % tp != 0) {
    problems.push_back(str_cat("--expert-tensor-parallel-size ", expert_tp(),
                               " must divide --tensor-model-parallel-size ", tp, " or be a multiple of it"));
  }
  if (problems.empty() && world_size % (expert_tp() * ep * pp) != 0) {
    problems.push_back(str_cat("decoder world_size (", world_size,
                               ") is not divisible by expert_tensor_model_pipeline_parallel size (",
                               expert_tp() * ep * pp, ")"));
  }
  return problems;
}

ParallelState::ParallelState(const ParallelConfig& config, int rank) : config_(config), rank_(rank) {
  const auto problems = config.validate();
  throw_if_problems("invalid parallel layout", problems, ProblemHeading::kList);
  MEGATRON_CHECK(rank >= 0 && rank < config.world_size, "rank ", rank, " is outside the world of ", config.world_size);
  const RankGenerator gen(config.tp, 1, config.dp(), config.pp, config.cp, config.order());
  tp_group_ = group_of(gen.groups("tp"), rank);
  pp_group_ = group_of(gen.groups("pp"), rank);
  dp_group_ = group_of(gen.groups("dp"), rank);
  dp_cp_group_ = group_of(gen.groups("dp-cp"), rank);
  mp_group_ = group_of(gen.groups("tp-pp"), rank);
  const auto cp_group = group_of(gen.groups("cp"), rank);
  tp_rank_ = position_in(tp_group_, rank);
  pp_rank_ = position_in(pp_group_, rank);
  dp_rank_ = position_in(dp_group_, rank);
  cp_rank_ = position_in(cp_group, rank);
  embedding_group_ = {pp_group_.front()};
  if (pp_group_.size() > 1) embedding_group_.push_back(pp_group_.back());
  // The experts' grid: the same order with tp = ETP, ep, dp = EDP, cp = 1 (Megatron's
  // expert_decoder_rank_generator).
  const RankGenerator experts(config.expert_tp(), config.ep, config.expert_dp(), config.pp, 1, config.order());
  ep_group_ = group_of(experts.groups("ep"), rank);
  expert_tp_group_ = group_of(experts.groups("tp"), rank);
  expert_dp_group_ = group_of(experts.groups("dp"), rank);
  expert_tp_ep_group_ = group_of(experts.groups("tp-ep"), rank);
  expert_mp_group_ = group_of(experts.groups("tp-ep-pp"), rank);
  // Megatron's rule: the two grids share their pipelines (with pp last in the order they do).
  MEGATRON_CHECK(config.ep == 1 || group_of(experts.groups("pp"), rank) == pp_group_,
                 "When not using pp-last rank ordering, the data parallel size of the attention and moe layers must "
                 "be the same (--use-tp-pp-dp-mapping with expert parallelism)");
  ep_rank_ = position_in(ep_group_, rank);
  expert_tp_rank_ = position_in(expert_tp_group_, rank);
  expert_dp_rank_ = position_in(expert_dp_group_, rank);
  checkpoint_shard_group_ = group_of(checkpoint_shard_groups(), rank);
}

std::vector<std::array<int, 3>> ParallelState::checkpoint_shards_of_ranks() const {
  const ParallelConfig& c = config_;
  const RankGenerator dense(c.tp, 1, c.dp(), c.pp, c.cp, c.order());
  const RankGenerator experts(c.expert_tp(), c.ep, c.expert_dp(), c.pp, 1, c.order());
  // Every rank's position in its group of each kind.
  const auto positions = [&](const RankGroups& groups) {
    std::vector<int> of(static_cast<std::size_t>(c.world_size));
    for (const auto& g : groups) {
      for (std::size_t i = 0; i < g.size(); ++i) of[static_cast<std::size_t>(g[i])] = static_cast<int>(i);
    }
    return of;
  };
  const auto tp_of = positions(dense.groups("tp")), pp_of = positions(dense.groups("pp"));
  const auto etp_of = positions(experts.groups("tp")), ep_of = positions(experts.groups("ep"));
  std::vector<std::array<int, 3>> out;
  for (std::size_t r = 0; r < static_cast<std::size_t>(c.world_size); ++r) {
    out.push_back({c.tp >= c.expert_tp() ? tp_of[r] : etp_of[r], pp_of[r], ep_of[r]});
  }
  return out;
}

RankGroups ParallelState::checkpoint_shard_groups() const {
  // In the order of their first rank, ranks ascending.
  std::map<std::array<int, 3>, std::size_t> index;
  RankGroups groups;
  const auto shards = checkpoint_shards_of_ranks();
  for (int r = 0; r < config_.world_size; ++r) {
    const auto [it, added] = index.emplace(shards[static_cast<std::size_t>(r)], groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(r);
  }
  return groups;
}

int ParallelState::checkpoint_shard_index() const {
  return config_.tp >= config_.expert_tp() ? tp_rank_ : expert_tp_rank_;
}

int ParallelState::next_pipeline_rank() const {
  return pp_group_[static_cast<std::size_t>((pp_rank_ + 1) % config_.pp)];
}

int ParallelState::prev_pipeline_rank() const {
  return pp_group_[static_cast<std::size_t>((pp_rank_ + config_.pp - 1) % config_.pp)];
}

std::uint64_t ParallelState::default_seed(std::uint64_t seed) const {
  return seed + 100 * static_cast<std::uint64_t>(pp_rank_);
}

std::uint64_t ParallelState::model_parallel_seed(std::uint64_t seed) const {
  return default_seed(seed) + 2718 + static_cast<std::uint64_t>(tp_rank_);
}

std::uint64_t ParallelState::expert_parallel_seed(std::uint64_t seed) const {
  return default_seed(seed) + 1024 + 100 * static_cast<std::uint64_t>(ep_rank_) +
         static_cast<std::uint64_t>(expert_tp_rank_);
}

}  // namespace megatron::parallel
