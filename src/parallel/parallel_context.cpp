// ParallelContext::create (see parallel_context.h): one communicator group per kind, made on every
// rank in Megatron's creation order (parallel_state.initialize_model_parallel) from the same
// RankGenerator lists that ParallelState uses, so the groups and the state always agree.
#include "megatron/parallel/parallel_context.h"

#include <algorithm>

#include "megatron/core/check.h"

namespace megatron::parallel {

ParallelContext ParallelContext::create(const ParallelState& state, Communicator& comm) {
  MEGATRON_CHECK(comm.world_size() == state.world_size() && comm.rank() == state.rank(), "the launcher started ",
                 comm.world_size(), " ranks (this is rank ", comm.rank(), ") but the parallel layout is for ",
                 state.world_size(), " ranks (rank ", state.rank(), ")");
  const ParallelConfig& c = state.config();
  const RankGenerator gen(c.tp, 1, c.dp(), c.pp, c.cp, c.order());
  ParallelContext pc;
  pc.state = &state;
  pc.comm = &comm;
  pc.world = comm.world();
  pc.dp_cp = comm.new_group("data-parallel (with context-parallel)", gen.groups("dp-cp"));
  pc.dp = comm.new_group("data-parallel", gen.groups("dp"));
  pc.cp = comm.new_group("context-parallel", gen.groups("cp"));
  pc.mp = comm.new_group("model-parallel", gen.groups("tp-pp"));
  pc.tp = comm.new_group("tensor-model-parallel", gen.groups("tp"));
  const RankGroups pp_groups = gen.groups("pp");
  pc.pp = comm.new_group("pipeline-model-parallel", pp_groups);
  RankGroups embedding;
  for (const auto& group : pp_groups) {
    embedding.push_back({group.front()});
    if (group.size() > 1) embedding.back().push_back(group.back());
  }
  // Ranks of no embedding group (middle stages) each get a group of their own, so that the groups
  // cover the world as new_group requires; they never use it.
  for (const auto& group : pp_groups) {
    for (std::size_t i = 1; i + 1 < group.size(); ++i) embedding.push_back({group[i]});
  }
  pc.embedding = comm.new_group("embedding", embedding);
  // The experts' grid (ParallelState's expert RankGenerator).
  const RankGenerator experts(c.expert_tp(), c.ep, c.expert_dp(), c.pp, 1, c.order());
  pc.ep = comm.new_group("expert-model-parallel", experts.groups("ep"));
  pc.expert_dp = comm.new_group("expert-data-parallel", experts.groups("dp"));
  pc.tp_ep = comm.new_group("expert-tensor-and-model-parallel", experts.groups("tp-ep"));
  // With the expert TP size the TP size these are groups made above (the same ranks): no new
  // communicators.
  const bool same_tp = c.expert_tp() == c.tp;
  pc.expert_tp = same_tp ? pc.tp : comm.new_group("expert-tensor-parallel", experts.groups("tp"));
  pc.checkpoint_shard =
      same_tp ? pc.expert_dp : comm.new_group("checkpoint-shard", state.checkpoint_shard_groups());
  MEGATRON_ASSERT(pc.tp->ranks() == state.tp_group() && pc.dp->ranks() == state.dp_group() &&
                      pc.pp->ranks() == state.pp_group() && pc.mp->ranks() == state.model_parallel_group() &&
                      pc.ep->ranks() == state.ep_group() && pc.expert_dp->ranks() == state.expert_dp_group() &&
                      pc.tp_ep->ranks() == state.expert_tp_ep_group() &&
                      pc.expert_tp->ranks() == state.expert_tp_group() &&
                      pc.checkpoint_shard->ranks() == state.checkpoint_shard_group(),
                  "communicator groups disagree with ParallelState");
  return pc;
}

}  // namespace megatron::parallel
