// The mixture-of-experts router (see moe_layer.h): scores, top-k (group-limited), the expert
// bias, capacity, the auxiliary losses attached to the probabilities, and the expert biases'
// updates.
#include "megatron/model/moe_layer.h"

#include <torch/autograd.h>

#include <cmath>
#include <limits>

#include "megatron/parallel/expert_parallel.h"
#include "megatron/parallel/mappings.h"

namespace megatron::model {
namespace {

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
  return parallel::sum_bookkeeping(counts.to(at::kLong), {sequence_parallel_ ? pc_.tp.get() : nullptr, pc_.cp.get()},
                                   *pc_.comm);
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
  // [routers, E] summed over TP x DP x CP (every rank of the pipeline stage; exact: whole numbers in fp32).
  const at::Tensor tokens = parallel::sum_bookkeeping(at::stack(counts), {pc.tp.get(), pc.dp_cp.get()}, *pc.comm);
  const at::Tensor offset = tokens.mean(-1, true) - tokens;
  std::size_t i = 0;
  for (const Router* r : routers) {
    if (!r->expert_bias().defined()) continue;
    r->expert_bias().add_(at::sign(offset[static_cast<std::int64_t>(i++)]) * r->bias_update_rate());
    r->tokens_since_update().zero_();
  }
}

}  // namespace megatron::model
