// The mixture-of-experts MLP (see moe_layer.h): router, auxiliary losses, token dropping,
// permutation, grouped experts, weighted sum back per token, shared expert.
#include "megatron/model/moe_layer.h"

#include <torch/autograd.h>

#include <cmath>
#include <limits>

#include "megatron/core/check.h"
#include "megatron/kernels/ops.h"
#include "megatron/parallel/expert_parallel.h"
#include "megatron/parallel/mappings.h"

namespace megatron::model {
namespace {

constexpr const char* kRouter = "router.";
constexpr const char* kExperts = "experts.";
constexpr const char* kSharedExperts = "shared_experts.";

// Megatron's MoEAuxLossAutoScaler: the identity on `x` in the forward; in the backward, the
// gradient of `x` plus `scale` for the auxiliary loss, so that the loss's own graph (the router)
// receives d(scale * loss).
class AttachAuxLoss : public torch::autograd::Function<AttachAuxLoss> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& loss,
                            double scale) {
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["loss_dtype"] = loss.scalar_type();
    return x.clone();
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const double scale = ctx->saved_data["scale"].toDouble();
    const at::Tensor loss_grad =
        at::full({}, scale, grads[0].options().dtype(ctx->saved_data["loss_dtype"].toScalarType()));
    return {grads[0], loss_grad, at::Tensor()};
  }
};

// The top-k of `scores` [T, E] along experts; with group-limited routing only within the
// `group_topk` groups whose best k / group_topk scores sum highest (moe_utils.group_limited_topk).
std::tuple<at::Tensor, at::Tensor> topk_of(const at::Tensor& scores, const MoeConfig& moe) {
  if (moe.router_group_topk <= 0) return scores.topk(moe.router_topk, -1);
  const std::int64_t tokens = scores.size(0), groups = moe.router_num_groups, per_group = scores.size(1) / groups;
  const at::Tensor group_scores =
      std::get<0>(scores.view({tokens, groups, per_group}).topk(moe.router_topk / moe.router_group_topk, -1)).sum(-1);
  const at::Tensor chosen = std::get<1>(group_scores.topk(moe.router_group_topk, -1));
  const at::Tensor group_mask = at::zeros({tokens, groups}, scores.options().dtype(at::kBool)).scatter_(1, chosen, true);
  const at::Tensor keep = group_mask.unsqueeze(-1).expand({tokens, groups, per_group}).reshape({tokens, -1});
  return scores.masked_fill(keep.logical_not(), -std::numeric_limits<double>::infinity()).topk(moe.router_topk, -1);
}

// Which (token, expert) pairs survive an expert capacity: each expert keeps `capacity` tokens, its
// most probable ones (policy probs) or its earliest routed ones (policy position), padded with
// unrouted tokens when fewer were routed. [T, E] bool.
at::Tensor capacity_mask(const at::Tensor& probs, const at::Tensor& map, const MoeConfig& moe) {
  const std::int64_t tokens = probs.size(0), experts = probs.size(1);
  const double wanted = std::ceil(static_cast<double>(tokens * moe.router_topk) / experts * moe.expert_capacity_factor);
  const std::int64_t capacity = std::min<std::int64_t>(static_cast<std::int64_t>(wanted), tokens);
  at::Tensor score = probs;
  if (moe.token_drop_policy == TokenDropPolicy::kPosition) {  // routed first, then by position
    const at::Tensor earlier = at::arange(tokens, 0, -1, probs.options()).unsqueeze(1);
    score = map.to(probs.scalar_type()) * (2.0 * tokens) + earlier;
  }
  const at::Tensor kept = std::get<1>(score.topk(capacity, 0));
  return at::zeros_like(map).scatter_(0, kept, true);
}

// x [N, in] rows grouped by expert (`offsets`: the cumulative row counts, int32) times each
// expert's weight [E, out, in] transposed: LibTorch's grouped matrix multiply (CPU and CUDA), or
// one product per expert where its alignment rules (rows of 16 bytes) or dtypes do not hold.
at::Tensor grouped_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& counts) {
  const at::ScalarType t = x.scalar_type();
  const std::int64_t align = 16 / static_cast<std::int64_t>(x.element_size());
  const bool grouped = (t == at::kFloat || t == at::kBFloat16 || t == at::kHalf) && weight.size(1) % align == 0 &&
                       weight.size(2) % align == 0;
  if (grouped) return at::_grouped_mm(x, weight.transpose(1, 2), counts.cumsum(0).to(at::kInt));
  std::vector<at::Tensor> parts;
  std::int64_t row = 0;
  const auto per_expert = counts.cpu();
  for (std::int64_t e = 0; e < weight.size(0); ++e) {
    const std::int64_t n = per_expert[e].item<std::int64_t>();
    parts.push_back(at::matmul(x.narrow(0, row, n), weight[e].t()));
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

}  // namespace

Router::Router(const ModelConfig& c, const parallel::ParameterInit& init, const parallel::ParallelContext& pc,
               bool sequence_parallel, const at::TensorOptions& options)
    : moe_(c.moe),
      pc_(pc),
      sequence_parallel_(sequence_parallel),
      cp_region_(pc),
      weight_(init.normal("weight", {c.moe.num_experts, c.hidden_size}, c.init_method_std, {}, pc, options)) {
  if (pc.cp) cp_region_.tp = pc.cp;
  const auto fp32 = options.dtype(at::kFloat);
  local_tokens_ = at::zeros({c.moe.num_experts}, fp32);
  if (moe_.router_enable_expert_bias) expert_bias_ = at::zeros({c.moe.num_experts}, fp32);
}

int Router::partition_size() const {
  return (sequence_parallel_ ? parallel::tp_size(pc_) : 1) * (pc_.cp ? pc_.cp->size() : 1);
}

at::Tensor Router::counted_over_partition(const at::Tensor& counts) const {
  at::Tensor total = counts.to(at::kLong).contiguous();
  if (sequence_parallel_) pc_.comm->all_reduce(total, parallel::ReduceOp::kSum, *pc_.tp).wait();
  if (pc_.cp && pc_.cp->size() > 1) pc_.comm->all_reduce(total, parallel::ReduceOp::kSum, *pc_.cp).wait();
  return total;
}

at::Tensor Router::gathered_over_partition(const at::Tensor& x) const {
  at::Tensor out = sequence_parallel_ ? parallel::gather_from_sequence_parallel_region(x, pc_) : x;
  return pc_.cp && pc_.cp->size() > 1 ? parallel::gather_from_sequence_parallel_region(out, cp_region_) : out;
}

Routing Router::route(const at::Tensor& x, std::int64_t seq_length, const ForwardContext& ctx) const {
  const bool training = ctx.training && at::GradMode::is_enabled();
  const std::int64_t tokens = x.size(0), experts = moe_.num_experts, k = moe_.router_topk;
  at::Tensor logits = at::linear(x.to(at::kFloat), weight_.to(at::kFloat));  // [T, E]
  Routing r;
  if (training && moe_.z_loss_coeff > 0) {
    // Each rank's share of the mean over the partition's tokens (Megatron divides by TP x CP).
    const double share = moe_.z_loss_coeff / partition_size();
    const at::Tensor z = at::logsumexp(logits, -1).square().mean() * share;
    r.z_loss = z.detach() / share;
    logits = AttachAuxLoss::apply(logits, z, ctx.moe_aux_loss_scale);
  }
  at::Tensor probs, indices;
  if (moe_.score_function == RouterScore::kSigmoid) {
    const at::Tensor scores = at::sigmoid(logits);
    indices = std::get<1>(topk_of(expert_bias_.defined() ? scores + expert_bias_ : scores, moe_));
    probs = scores.gather(1, indices);
    if (k > 1) probs = probs / (probs.sum(-1, /*keepdim=*/true) + 1e-20);
  } else if (moe_.router_pre_softmax) {
    std::tie(probs, indices) = topk_of(at::softmax(logits, -1), moe_);
  } else {
    at::Tensor top;
    std::tie(top, indices) = topk_of(logits, moe_);
    probs = at::softmax(top, -1);
  }
  if (moe_.router_topk_scaling_factor > 0) probs = probs * moe_.router_topk_scaling_factor;
  r.probs = at::zeros({tokens, experts}, probs.options()).scatter(1, indices, probs);
  const at::Tensor selected = at::zeros({tokens, experts}, x.options().dtype(at::kBool)).scatter_(1, indices, true);
  r.tokens_per_expert = selected.sum(0);
  r.routing_map = selected;
  if (moe_.expert_capacity_factor > 0) {
    const at::Tensor keep = capacity_mask(r.probs.detach(), selected, moe_);
    r.routing_map = moe_.pad_expert_input_to_capacity ? keep : selected.logical_and(keep);
    r.probs = r.probs * r.routing_map;
  }
  const double coeff = moe_.aux_loss_coeff;
  if (training && coeff > 0 && moe_.load_balancing != LoadBalancing::kNone) {
    // The scores the loss balances: every expert's probability, not only the selected ones'.
    at::Tensor scores = moe_.score_function == RouterScore::kSigmoid ? at::sigmoid(logits) : at::softmax(logits, -1);
    if (moe_.score_function == RouterScore::kSigmoid && k > 1) scores = scores / (scores.sum(-1, true) + 1e-20);
    at::Tensor loss;
    // Under sequence or context parallelism each rank's loss is its part of the whole sequence's:
    // its own scores against the counts of all (summed over the partition, these parts are the
    // loss).
    const std::int64_t parts = partition_size();
    if (moe_.load_balancing == LoadBalancing::kAuxLoss) {  // switch_load_balancing_loss_func
      const double n = static_cast<double>(tokens * parts);
      loss = (scores.sum(0) * counted_over_partition(r.tokens_per_expert).to(at::kFloat)).sum() *
             (coeff * static_cast<double>(experts) / (static_cast<double>(k) * n * n));
    } else {  // sequence_load_balancing_loss_func: per sequence, then the mean over the batch
      const std::int64_t batch = tokens / seq_length, whole = seq_length * parts;
      const at::Tensor all_scores = gathered_over_partition(scores);
      const at::Tensor per_seq = selected.view({seq_length, batch, experts}).sum(0).to(at::kFloat) /
                                 (static_cast<double>(whole * k) / static_cast<double>(experts));
      loss = (per_seq * all_scores.view({whole, batch, experts}).mean(0)).sum(-1).mean() * coeff;
    }
    r.load_balancing_loss = loss.detach() / coeff;
    r.probs = AttachAuxLoss::apply(r.probs, loss, ctx.moe_aux_loss_scale);
  }
  // Counted once per training pass: not in the no-grad first pass of a recomputed layer, but in its
  // recomputation (Megatron's torch.is_grad_enabled()).
  if (training && expert_bias_.defined() && at::GradMode::is_enabled()) {
    local_tokens_.add_(r.routing_map.sum(0).to(at::kFloat));
  }
  return r;
}

void Router::collect(const std::string& prefix, ParameterList& out) const {
  parallel::TensorParallelLayout layout;
  layout.sequence_parallel = sequence_parallel_;  // replicated, fed by this rank's tokens
  out.add(prefix + "weight", weight_, layout);
  if (expert_bias_.defined()) out.add_buffer(prefix + "expert_bias", expert_bias_);
}

void update_expert_biases(const std::vector<const Router*>& routers, const parallel::ParallelContext& pc) {
  std::vector<at::Tensor> counts;
  for (const Router* r : routers) {
    if (r->expert_bias().defined()) counts.push_back(r->tokens_since_update());
  }
  if (counts.empty()) return;
  at::NoGradGuard no_grad;
  at::Tensor tokens = at::stack(counts);  // [routers, E]
  // Summed over TP x DP x CP (every rank of the pipeline stage; exact: whole numbers in fp32).
  if (pc.tp->size() > 1) pc.comm->all_reduce(tokens, parallel::ReduceOp::kSum, *pc.tp).wait();
  if (pc.dp_cp->size() > 1) pc.comm->all_reduce(tokens, parallel::ReduceOp::kSum, *pc.dp_cp).wait();
  const at::Tensor offset = tokens.mean(-1, true) - tokens;
  std::size_t i = 0;
  for (const Router* r : routers) {
    if (!r->expert_bias().defined()) continue;
    r->expert_bias().add_(at::sign(offset[static_cast<std::int64_t>(i++)]) * r->bias_update_rate());
    r->tokens_since_update().zero_();
  }
}

namespace {

// The experts' weights split over the expert-TP group as Megatron's expert tensor parallelism splits them: fc1
// [E, (2) F, h] by rows (SwiGLU: [gate block r; up block r]), fc2 [E, h, F] by columns.
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
  at::Tensor all_map = routing_map;
  if (gathered) {
    at::Tensor bytes = at::empty({all_tokens.size(0), num_experts_}, routing_map.options().dtype(at::kByte));
    pc_.comm->all_gather(bytes, routing_map.to(at::kByte).contiguous(), *dispatch_.tp).wait();
    all_map = bytes.to(at::kBool);
  }
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
  const parallel::ProcessGroup& tp_group = pc_.expert_tp ? *pc_.expert_tp : *pc_.tp;
  const int ep = ep_group.size(), tp = tp_group.size(), tp_rank = tp_group.rank(), ep_rank = ep_group.rank();
  const std::int64_t local = fc1_.size(0), first = ep_rank * local;
  // Every rank's selections per expert, [tp, ep, E] on the host: the exchanges' sizes.
  const at::Tensor counts = routing_map.sum(0).to(at::kLong).contiguous();
  at::Tensor over_ep = at::empty({ep, num_experts_}, counts.options());
  pc_.comm->all_gather(over_ep, counts, ep_group).wait();
  at::Tensor all = over_ep;
  if (tp > 1) {
    all = at::empty({tp, ep, num_experts_}, counts.options());
    pc_.comm->all_gather(all, over_ep, tp_group).wait();
  }
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
