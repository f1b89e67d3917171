// A mixture-of-experts MLP as Megatron-Core's MoELayer computes it (core_v0.12): the top-k router
// (moe/router.py TopKRouter with moe_utils' routing), its load-balancing and z losses, token
// dropping at a capacity, the tokens permuted by expert, the experts as grouped GEMMs, the expert
// outputs weighted by their probabilities and summed back per token, and an optional shared
// expert added.
//
// Tokens are the rows of x [s, b, h] flattened (token t = s_index * b + b_index). The router's
// gating GEMM, softmax/sigmoid, top-k and the weighting of the expert outputs run in fp32 (Megatron's
// --moe-router-dtype fp32). The auxiliary losses do not change the output: each is attached to a
// tensor of the forward pass so that the backward adds its gradient, scaled as the main loss is
// (ForwardContext::moe_aux_loss_scale; Megatron's MoEAuxLossAutoScaler).
// The experts are split over the expert-parallel (EP) group, E/EP whole experts per rank, and each
// over TP (fc1's rows, fc2's columns: Megatron's expert tensor parallelism with ETP = TP, which
// requires sequence parallelism for MoE). Each rank routes its own tokens; the load-balancing
// loss counts tokens over the TP group (Megatron's sequence-partition group). Two dispatchers
// (--moe-token-dispatcher-type) move tokens to the experts and back, with the same results:
// allgather (Megatron's default; over the TP x EP group) and alltoall (over EP, then over TP).
// The parameters are named as Megatron-Core's distributed checkpoints name them, one tensor per
// layer with the expert as its first dimension (this rank's block of it under EP).
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "megatron/model/transformer_layer.h"

namespace megatron::model {

// What the router decided for T tokens over E experts.
struct Routing {
  at::Tensor probs;        // [T, E] fp32: each token's weight per expert, 0 where not routed
  at::Tensor routing_map;  // [T, E] bool: the (token, expert) pairs computed (after dropping)
  at::Tensor tokens_per_expert;  // [E] int64: top-k selections per expert before dropping
  // The losses' values as Megatron logs them (divided by their coefficients): detached scalars,
  // undefined when not computed (not training, or a coefficient of 0).
  at::Tensor load_balancing_loss, z_loss;
};

class Router {
 public:
  // sequence_parallel: the input is this TP rank's share of the tokens (the weight's gradient is
  // summed over TP, and the losses count tokens over TP); likewise over CP.
  Router(const ModelConfig& config, const parallel::ParameterInit& init, const parallel::ParallelContext& pc,
         bool sequence_parallel, const at::TensorOptions& options);
  // x [T, h]: the routing; attaches the auxiliary losses (training only) to the graph.
  Routing route(const at::Tensor& x, std::int64_t seq_length, const ForwardContext& ctx) const;
  void collect(const std::string& prefix, ParameterList& out) const;
  // Aux-loss-free balancing (--moe-router-enable-expert-bias): the bias added to the sigmoid scores
  // for selection only, and the tokens routed to each expert since the last update.
  const at::Tensor& expert_bias() const { return expert_bias_; }
  const at::Tensor& tokens_since_update() const { return local_tokens_; }
  double bias_update_rate() const { return moe_.router_bias_update_rate; }

 private:
  at::Tensor select(const at::Tensor& logits, at::Tensor& probs, at::Tensor& indices) const;

  // The ranks holding parts of the same sequences (Megatron's tp_cp group: TP under sequence
  // parallelism, times CP), which the losses count tokens over.
  int partition_size() const;
  // Token counts per expert over the partition's tokens (no gradient).
  at::Tensor counted_over_partition(const at::Tensor& counts) const;
  // x [n, ...] of every rank of the partition, concatenated along dim 0 (differentiable).
  at::Tensor gathered_over_partition(const at::Tensor& x) const;

  MoeConfig moe_;
  const parallel::ParallelContext& pc_;
  bool sequence_parallel_;
  parallel::ParallelContext cp_region_;  // pc_ with CP as its TP group: the gathers over CP
  at::Tensor weight_;       // [E, h]
  at::Tensor expert_bias_;  // [E] fp32 buffer (defined with expert bias)
  at::Tensor local_tokens_; // [E] fp32
};

// Megatron's aux-loss-free balancing step (finalize_model_grads' _update_router_expert_bias), after
// each training step's gradient reduction: the tokens each router sent each expert since the last
// update, summed over TP x DP x CP, move every expert's bias by the update rate toward balance
// (+rate below the mean count, -rate above it, none at it), and the counts restart. Collective
// over the pipeline stage's ranks; nothing to do without expert biases.
void update_expert_biases(const std::vector<const Router*>& routers, const parallel::ParallelContext& pc);

class MoeLayer {
 public:
  // `layer`: the model's global layer index (where its auxiliary losses are tracked).
  MoeLayer(const ModelConfig& config, const parallel::ParameterInit& init, const parallel::ParallelContext& pc,
           const parallel::LinearOptions& options, int layer = 0);
  // x [s, b, h] -> (output [s, b, h], undefined bias), as Mlp::forward.
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& x, const ForwardContext& ctx) const;
  // The routing of the last forward (for tests and logging).
  const Routing& last_routing() const { return last_; }
  const Router& router() const { return router_; }
  void collect(const std::string& prefix, ParameterList& out) const;

 private:
  at::Tensor experts(const at::Tensor& tokens, const at::Tensor& tokens_per_expert) const;
  // The dispatchers: tokens [T, h] with their routing to this rank's experts and the experts'
  // outputs back, weighted by their probabilities and summed per token; [T, h] fp32.
  // Megatron's allgather dispatcher: tokens, probabilities and routing all-gathered over the
  // TP x EP group, this rank's experts (its TP shard of each) run on the tokens routed to them,
  // the partial outputs reduce-scattered back.
  at::Tensor all_gather_experts(const at::Tensor& tokens, const at::Tensor& routing_map, const at::Tensor& probs) const;
  // Megatron's alltoall dispatcher (expert parallelism): each token sent to the EP ranks of its
  // experts and back.
  at::Tensor all_to_all_experts(const at::Tensor& tokens, const at::Tensor& routing_map, const at::Tensor& probs) const;

  int layer_, num_layers_;  // this layer's global index, of the model's layers
  bool swiglu_;
  int num_experts_;
  TokenDispatcher dispatcher_;
  const parallel::ParallelContext& pc_;
  // pc_ with the TP x EP group as its TP group: what the allgather dispatcher's sequence-parallel
  // regions gather over.
  parallel::ParallelContext dispatch_;
  Router router_;
  at::Tensor fc1_;  // [E/ep, (2) F/tp, h]: [gate; up] per expert with SwiGLU (this rank's blocks of each)
  at::Tensor fc2_;  // [E/ep, h, F/tp]
  std::optional<Mlp> shared_experts_;
  mutable Routing last_;
};

}  // namespace megatron::model
