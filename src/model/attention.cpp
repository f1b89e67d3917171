// Self-attention with Megatron's fused QKV layout (spec 10.2), grouped-query heads, rotary
// embeddings (10.4), scaled causal softmax with masked scores set to -10000, attention dropout.
// TP rank r owns query groups [r * ng/tp, (r + 1) * ng/tp) with their query heads: a contiguous
// block of the fused QKV rows, and the matching columns of linear_proj.
#include <cmath>

#include "megatron/core/check.h"
#include "megatron/model/transformer_layer.h"

namespace megatron::model {

SelfAttention::SelfAttention(const ModelConfig& c, at::Generator& gen, const parallel::ParallelContext& pc,
                             const parallel::LinearOptions& options)
    : config_(c),
      local_heads_(c.num_attention_heads / parallel::tp_size(pc)),
      local_groups_(c.num_query_groups / parallel::tp_size(pc)),
      linear_qkv_(c.hidden_size, c.qkv_size(), c.init_method_std, gen, pc, options),
      linear_proj_(c.num_attention_heads * c.kv_channels, c.hidden_size,
                   c.init_method_std / std::sqrt(2.0 * c.num_layers), gen, pc, options) {
  MEGATRON_CHECK(c.num_query_groups % parallel::tp_size(pc) == 0 && c.num_attention_heads % parallel::tp_size(pc) == 0,
                 "--num-attention-heads (", c.num_attention_heads, ") and --num-query-groups (", c.num_query_groups,
                 ") must be divisible by --tensor-model-parallel-size (", parallel::tp_size(pc), ")");
}

at::Tensor SelfAttention::apply_rotary(const at::Tensor& t) const {
  const int64_t s = t.size(0);
  const int64_t dim = config_.rotary_dim();
  const auto fp32 = t.options().dtype(at::kFloat);
  const at::Tensor inv_freq = 1.0 / at::pow(config_.rotary_base, at::arange(0, dim, 2, fp32) / static_cast<double>(dim));
  const at::Tensor freqs = at::outer(at::arange(s, fp32), inv_freq);  // [s, dim/2]
  const at::Tensor emb = config_.rotary_interleaved
                             ? at::stack({freqs, freqs}, -1).reshape({s, dim})
                             : at::cat({freqs, freqs}, -1);
  const at::Tensor cos = emb.cos().view({s, 1, 1, dim}).to(t.scalar_type());
  const at::Tensor sin = emb.sin().view({s, 1, 1, dim}).to(t.scalar_type());
  const at::Tensor rot = t.narrow(-1, 0, dim);
  at::Tensor rotated_half;
  if (config_.rotary_interleaved) {
    const at::Tensor x1 = rot.slice(-1, 0, dim, 2), x2 = rot.slice(-1, 1, dim, 2);
    rotated_half = at::stack({-x2, x1}, -1).flatten(-2);
  } else {
    const auto halves = rot.chunk(2, -1);
    rotated_half = at::cat({-halves[1], halves[0]}, -1);
  }
  const at::Tensor out = rot * cos + rotated_half * sin;
  if (dim == t.size(-1)) return out;
  return at::cat({out, t.narrow(-1, dim, t.size(-1) - dim)}, -1);
}

std::pair<at::Tensor, at::Tensor> SelfAttention::forward(const at::Tensor& x, const at::Tensor& mask,
                                                         const ForwardContext& ctx) const {
  const int64_t np = local_heads_, ng = local_groups_, hn = config_.kv_channels;
  const int64_t per_group = np / ng;
  // [s, b, ng/tp, (np/ng + 2) * hn]: each local group's query heads, then its key, then its value
  // (the whole sequence: under sequence parallelism linear_qkv gathers it).
  at::Tensor qkv = linear_qkv_.forward(x);
  const int64_t s = qkv.size(0), b = qkv.size(1);
  qkv = qkv.view({s, b, ng, (per_group + 2) * hn});
  const auto parts = qkv.split_with_sizes({per_group * hn, hn, hn}, -1);
  at::Tensor q = parts[0].reshape({s, b, np, hn});
  at::Tensor k = parts[1];  // [s, b, ng, hn]
  at::Tensor v = parts[2];
  if (config_.position_embedding == PositionEmbedding::kRope) {
    q = apply_rotary(q);
    k = apply_rotary(k);
  }
  if (per_group > 1) {  // query head h reads key/value group h / (np / ng)
    k = k.repeat_interleave(per_group, 2);
    v = v.repeat_interleave(per_group, 2);
  }
  // [b, np, s, hn]
  q = q.permute({1, 2, 0, 3});
  k = k.permute({1, 2, 0, 3});
  v = v.permute({1, 2, 0, 3});
  at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) * (1.0 / std::sqrt(static_cast<double>(hn)));
  const at::Tensor masked =
      mask.defined() ? mask : at::ones({s, s}, scores.options().dtype(at::kBool)).triu(1).view({1, 1, s, s});
  scores = scores.masked_fill(masked, -10000.0);
  at::Tensor probs = at::softmax(scores, -1);
  probs = dropout(probs, config_.attention_dropout, ctx, ctx.model_parallel_gen);
  const at::Tensor context = at::matmul(probs, v).permute({2, 0, 1, 3}).reshape({s, b, np * hn});
  return {linear_proj_.forward(context), linear_proj_.bias()};
}

// Megatron-Core registers linear_proj (Attention.__init__) before linear_qkv (SelfAttention), so
// its parameter order, and with it the data-parallel bucket layout, lists the projection first.
void SelfAttention::collect(const std::string& prefix, ParameterList& out) const {
  linear_proj_.collect(prefix + "linear_proj.", out);
  linear_qkv_.collect(prefix + "linear_qkv.", out);
}

}  // namespace megatron::model
