// The mixture-of-experts MLP (see moe_layer.h): token dropping is the router's (moe_router.cpp);
// here the permutation, the dispatchers, the grouped experts, the weighted sum back per token and
// the shared expert.
#include "megatron/model/moe_layer.h"

#include <cmath>

#include "megatron/core/check.h"
#include "megatron/kernels/ops.h"
#include "megatron/parallel/expert_parallel.h"
#include "megatron/parallel/mappings.h"

namespace megatron::model {
namespace {

constexpr const char* kRouter = "router.";
constexpr const char* kExperts = "experts.";
constexpr const char* kSharedExperts = "shared_experts.";

// x [N, in] rows grouped by expert (`offsets`: the cumulative row counts, int32) times each
// expert's weight [E, out, in] transposed: LibTorch's grouped matrix multiply (CPU and CUDA), or
// one product per expert where its alignment rules (rows of 16 bytes) or dtypes do not hold.
at::Tensor grouped_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& counts) {
  const at::ScalarType t = x.scalar_type();
  const std::int64_t align = 16 / static_cast<std::int64_t>(x.element_size());
  const bool grouped = (t == at::kFloat || t == at::kBFloat16 || t == at::kHalf) && weight.size(1) % align == 0 &&
                       weight.size(2) % align == 0;
  if (grouped) return kernels::ops::grouped_mm(x, weight.transpose(1, 2), counts.cumsum(0).to(at::kInt));
  std::vector<at::Tensor> parts;
  std::int64_t row = 0;
  const auto per_expert = counts.cpu();
  for (std::int64_t e = 0; e < weight.size(0); ++e) {
    const std::int64_t n = per_expert[e].item<std::int64_t>();
    parts.push_back(kernels::ops::matmul(x.narrow(0, row, n), weight[e].t()));
    row += n;
  }
  return at::cat(parts, 0);
}

// The (expert, token) pairs of a routing map [T, E], by expert, then by token (moe_utils.permute's
// order; grouped by destination rank under expert parallelism).
struct Pairs {
  at::Tensor expert_of, token_of;
};
Pairs pairs_of(const at::Tensor& routing_map) {
  const at::Tensor pairs = routing_map.t().nonzero();
  return {pairs.select(1, 0), pairs.select(1, 1)};
}

// The experts' outputs [pairs, h] weighted by their routing probabilities (after fc2, in fp32)
// and summed per token: [tokens, h] fp32.
at::Tensor combine(const at::Tensor& out, const at::Tensor& probs, const Pairs& p, std::int64_t tokens) {
  const at::Tensor weights = probs.index({p.token_of, p.expert_of}).unsqueeze(1);
  return at::zeros({tokens, out.size(1)}, out.options().dtype(at::kFloat))
      .index_add(0, p.token_of, out.to(at::kFloat) * weights);
}

// The experts' weights split over the expert-TP group as Megatron's expert tensor parallelism
// splits them: fc1 [E, (2) F, h] by rows (SwiGLU: [gate block r; up block r]), fc2 [E, h, F] by
// columns.
parallel::TensorParallelLayout expert_fc1_layout(bool swiglu) {
  parallel::TensorParallelLayout l;
  l.partition_dim = 1;
  l.partition_stride = swiglu ? 2 : 1;
  l.expert_parallel = true;
  return l;
}
parallel::TensorParallelLayout expert_fc2_layout() {
  parallel::TensorParallelLayout l;
  l.partition_dim = 2;
  l.expert_parallel = true;
  return l;
}

}  // namespace

MoeLayer::MoeLayer(const ModelConfig& c, const parallel::ParameterInit& init, const parallel::ParallelContext& pc,
                   const parallel::LinearOptions& options, int layer)
    : layer_(layer),
      num_layers_(c.num_layers),
      swiglu_(c.swiglu),
      num_experts_(c.moe.num_experts),
      dispatcher_(c.moe.token_dispatcher),
      pc_(pc),
      dispatch_(pc),
      router_(c, init.scope(kRouter), pc, options.sequence_parallel, options.tensor_options) {
  if (pc.tp_ep) dispatch_.tp = pc.tp_ep;
  MEGATRON_CHECK(parallel::tp_size(pc) == 1 || options.sequence_parallel,
                 "During training, performance may degrade if MoE and tensor parallelism are enabled without also "
                 "enabling sequence parallelism.");
  const std::int64_t ffn = c.moe.expert_ffn_hidden_size(c.ffn_hidden_size), h = c.hidden_size;
  const parallel::ParameterInit experts = init.scope(kExperts);
  const std::vector<std::int64_t> fc1_shape = {num_experts_, swiglu_ ? 2 * ffn : ffn, h}, fc2_shape = {num_experts_, h, ffn};
  const double fc1_std = c.init_method_std, fc2_std = c.init_method_std / std::sqrt(2.0 * c.num_layers);
  // Under expert parallelism this rank's experts [ep_rank * E/ep, (ep_rank + 1) * E/ep), each
  // split over the expert-TP group.
  const int ep = pc.state != nullptr ? pc.state->ep() : 1, ep_rank = pc.state != nullptr ? pc.state->ep_rank() : 0;
  fc1_ = experts.normal_experts("linear_fc1.weight", fc1_shape, fc1_std, expert_fc1_layout(c.swiglu), ep_rank, ep, pc,
                                options.tensor_options);
  fc2_ = experts.normal_experts("linear_fc2.weight", fc2_shape, fc2_std, expert_fc2_layout(), ep_rank, ep, pc,
                                options.tensor_options);
  if (c.moe.shared_expert_intermediate_size > 0) {
    ModelConfig shared = c;
    shared.ffn_hidden_size = c.moe.shared_expert_intermediate_size;
    parallel::LinearOptions shared_options = options;
    shared_options.bias = false;
    shared_experts_.emplace(shared, init.scope(kSharedExperts), pc, shared_options);
  }
}

at::Tensor MoeLayer::experts(const at::Tensor& tokens, const at::Tensor& tokens_per_expert) const {
  at::Tensor h = grouped_linear(tokens, fc1_, tokens_per_expert);
  if (swiglu_) {
    const auto halves = h.chunk(2, -1);  // [gate ; up]
    h = at::silu(halves[0]) * halves[1];
  } else {
    h = at::gelu(h);
  }
  return grouped_linear(h, fc2_, tokens_per_expert);
}

std::pair<at::Tensor, at::Tensor> MoeLayer::forward(const at::Tensor& x, const ForwardContext& ctx) const {
  const std::int64_t s = x.size(0), b = x.size(1), h = x.size(2);
  const at::Tensor local = x.reshape({s * b, h});
  const Routing routing = router_.route(local, s, ctx);
  // What last_routing() shows: detached, so that it holds no graph past this pass.
  last_ = {routing.probs.detach(), routing.routing_map, routing.tokens_per_expert, routing.load_balancing_loss,
           routing.z_loss};
  if (ctx.moe_losses != nullptr) ctx.moe_losses->add(layer_, num_layers_, routing.z_loss, routing.load_balancing_loss);
  at::Tensor combined;
  if (dispatcher_ == TokenDispatcher::kAllToAll && pc_.ep && pc_.ep->size() > 1) {
    combined = all_to_all_experts(local, routing.routing_map, routing.probs);
  } else {
    combined = all_gather_experts(local, routing.routing_map, routing.probs);
  }
  at::Tensor result = combined.to(x.scalar_type()).view({s, b, h});
  if (shared_experts_) result = result + shared_experts_->forward(x).first;
  return {result, at::Tensor()};
}

at::Tensor MoeLayer::all_gather_experts(const at::Tensor& tokens, const at::Tensor& routing_map,
                                        const at::Tensor& probs) const {
  // Every rank of the TP x EP group sees the tokens (and routing) of all, and computes its own
  // experts on them: the TP ranks' shares of the sequence, the EP ranks' micro-batches.
  const bool gathered = dispatch_.tp->size() > 1;
  const at::Tensor all_tokens = gathered ? parallel::gather_from_sequence_parallel_region(tokens, dispatch_) : tokens;
  const at::Tensor all_probs = gathered ? parallel::gather_from_sequence_parallel_region(probs, dispatch_) : probs;
  const at::Tensor all_map =
      gathered ? parallel::gather_bookkeeping(routing_map.to(at::kByte), *dispatch_.tp, *pc_.comm).to(at::kBool)
               : routing_map;
  const std::int64_t local = fc1_.size(0), first = pc_.state != nullptr ? pc_.state->ep_rank() * local : 0;
  const at::Tensor local_map = all_map.narrow(1, first, local);
  const Pairs pairs = pairs_of(local_map);
  const at::Tensor out = experts(all_tokens.index_select(0, pairs.token_of), local_map.sum(0));
  const at::Tensor combined = combine(out, all_probs.narrow(1, first, local), pairs, all_tokens.size(0));
  // Each rank's tokens back, summed over the TP ranks' partial products and the EP ranks' experts.
  return gathered ? parallel::reduce_scatter_to_sequence_parallel_region(combined, dispatch_) : combined;
}

at::Tensor MoeLayer::all_to_all_experts(const at::Tensor& tokens, const at::Tensor& routing_map,
                                        const at::Tensor& probs) const {
  const parallel::ProcessGroup& ep_group = *pc_.ep;
  // The TP of the exchanges is the experts' (Megatron's dispatchers use the expert-TP group).
  const parallel::ProcessGroup& tp_group = parallel::expert_tp_group(pc_);
  const int ep = ep_group.size(), tp = tp_group.size(), tp_rank = tp_group.rank(), ep_rank = ep_group.rank();
  const std::int64_t local = fc1_.size(0), first = ep_rank * local;
  // Every rank's selections per expert, [tp, ep, E] on the host: the exchanges' sizes.
  const at::Tensor over_ep = parallel::gather_bookkeeping(routing_map.sum(0).to(at::kLong), ep_group, *pc_.comm);
  const at::Tensor all = tp > 1 ? parallel::gather_bookkeeping(over_ep, tp_group, *pc_.comm) : over_ep;
  const at::Tensor host = all.view({tp, ep, num_experts_}).cpu();
  const auto counts_of = host.accessor<std::int64_t, 3>();
  // Tokens of (TP rank t, EP rank r) for local expert j.
  const auto count = [&](int t, int r, std::int64_t j) { return counts_of[t][r][first + j]; };
  std::vector<std::int64_t> input_splits(ep, 0), output_splits(ep, 0), per_expert(local, 0), per_tp(tp, 0);
  for (int r = 0; r < ep; ++r) {
    for (std::int64_t j = 0; j < local; ++j) {
      input_splits[r] += counts_of[tp_rank][ep_rank][r * local + j];
      output_splits[r] += count(tp_rank, r, j);
      for (int t = 0; t < tp; ++t) {
        per_expert[j] += count(t, r, j);
        per_tp[t] += count(t, r, j);
      }
    }
  }
  const Pairs pairs = pairs_of(routing_map);  // grouped by destination rank
  // The tokens this rank's experts get from the EP ranks of its TP slice, [source][local expert],
  // then those of the other TP ranks' slices: [TP rank][source][local expert].
  at::Tensor received = parallel::all_to_all(tokens.index_select(0, pairs.token_of), output_splits, input_splits,
                                             ep_group, *pc_.comm);
  if (tp > 1) received = parallel::all_gather_rows(received, per_tp, tp_group, *pc_.comm);
  // Regrouped by local expert (then TP rank, then source) for the grouped GEMMs.
  std::vector<std::int64_t> order;
  order.reserve(static_cast<std::size_t>(received.size(0)));
  for (std::int64_t j = 0; j < local; ++j) {
    std::int64_t block = 0;  // where block (t, r) starts
    for (int t = 0; t < tp; ++t) {
      for (int r = 0; r < ep; ++r) {
        std::int64_t offset = block;
        for (std::int64_t k = 0; k < j; ++k) offset += count(t, r, k);
        for (std::int64_t i = 0; i < count(t, r, j); ++i) order.push_back(offset + i);
        for (std::int64_t k = 0; k < local; ++k) block += count(t, r, k);
      }
    }
  }
  const auto longs = at::TensorOptions().dtype(at::kLong).device(tokens.device());
  const at::Tensor by_expert = at::tensor(order, longs);
  at::Tensor out = experts(received.index_select(0, by_expert), at::tensor(per_expert, longs))
                       .index_select(0, at::argsort(by_expert));
  // Each TP rank's tokens back with the partial products of every TP rank's shard summed.
  if (tp > 1) out = parallel::reduce_scatter_rows(out, per_tp, tp_group, *pc_.comm);
  const at::Tensor back = parallel::all_to_all(out, input_splits, output_splits, ep_group, *pc_.comm);  // pairs' order
  return combine(back, probs, pairs, tokens.size(0));
}

void MoeLayer::collect(const std::string& prefix, ParameterList& out) const {
  router_.collect(prefix + kRouter, out);
  out.add(prefix + kExperts + "linear_fc1.weight", fc1_, expert_fc1_layout(swiglu_));
  out.add(prefix + kExperts + "linear_fc2.weight", fc2_, expert_fc2_layout());
  if (shared_experts_) shared_experts_->collect(prefix + kSharedExperts, out);
}

}  // namespace megatron::model
