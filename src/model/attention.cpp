// Self-attention with Megatron's fused QKV layout (spec 10.2), grouped-query heads, rotary
// embeddings (10.4), the scaled causal softmax and attention dropout. TP rank r owns query groups
// [r * ng/tp, (r + 1) * ng/tp) with their query heads: a contiguous block of the fused QKV rows,
// and the matching columns of linear_proj. Two ways to attend (AttentionBackend): LibTorch's
// scaled-dot-product attention (flash / cuDNN / memory-efficient on GPU), and the explicit path
// (QK^T, the causal softmax op, dropout, PV); neither repeats K and V across the query heads of a
// group. Attention dropout draws from the model-parallel stream on every path (context-parallel
// attention too).
#include <cmath>
#include <limits>

#include "megatron/core/check.h"
#include "megatron/kernels/aten/attention_ops.h"
#include "megatron/kernels/aten/rope_ops.h"
#include "megatron/kernels/aten/softmax_ops.h"
#include "megatron/kernels/ops.h"
#include "megatron/model/recompute.h"
#include "megatron/model/transformer_layer.h"
#include "megatron/parallel/context_parallel.h"
#include "megatron/parallel/parallel_state.h"

namespace megatron::model {
namespace {

// The projections' names, for the initialisation streams and collect().
constexpr const char* kQkv = "linear_qkv.";
constexpr const char* kProj = "linear_proj.";

// Megatron's RNG tracker fork: the device's default generator (which LibTorch's fused attention
// draws its dropout from) runs on `gen`'s stream for this scope, and `gen` advances by what was drawn.
class DefaultGeneratorFork {
 public:
  DefaultGeneratorFork(at::Generator* gen, const at::Device& device) : gen_(gen) {
    if (gen_ == nullptr) return;
    default_ = at::globalContext().defaultGenerator(device);
    saved_ = default_.get_state();
    default_.set_state(gen_->get_state());
  }
  ~DefaultGeneratorFork() {
    if (gen_ == nullptr) return;
    gen_->set_state(default_.get_state());
    default_.set_state(saved_);
  }
  DefaultGeneratorFork(const DefaultGeneratorFork&) = delete;
  DefaultGeneratorFork& operator=(const DefaultGeneratorFork&) = delete;

 private:
  at::Generator* gen_;
  at::Generator default_;
  at::Tensor saved_;
};

}  // namespace

bool uses_sdpa(AttentionBackend backend, const at::Device& device) {
  switch (backend) {
    case AttentionBackend::kFlash:
    case AttentionBackend::kFused: return true;
    case AttentionBackend::kAuto: return device.is_cuda();
    case AttentionBackend::kUnfused:
    case AttentionBackend::kLocal: return false;
  }
  return false;
}

SelfAttention::SelfAttention(const ModelConfig& c, const parallel::ParameterInit& init,
                             const parallel::ParallelContext& pc, const parallel::LinearOptions& options)
    : config_(c),
      local_heads_(c.num_attention_heads / parallel::tp_size(pc)),
      local_groups_(c.num_query_groups / parallel::tp_size(pc)),
      context_parallel_(pc.state != nullptr && pc.state->cp() > 1 ? &pc : nullptr),
      linear_qkv_(c.hidden_size, c.qkv_size(), c.init_method_std, init.scope(kQkv), pc, options),
      linear_proj_(c.num_attention_heads * c.kv_channels, c.hidden_size,
                   c.init_method_std / std::sqrt(2.0 * c.num_layers), init.scope(kProj), pc, options) {
  MEGATRON_CHECK(c.num_query_groups % parallel::tp_size(pc) == 0 && c.num_attention_heads % parallel::tp_size(pc) == 0,
                 "--num-attention-heads (", c.num_attention_heads, ") and --num-query-groups (", c.num_query_groups,
                 ") must be divisible by --tensor-model-parallel-size (", parallel::tp_size(pc), ")");
  if (c.qk_layernorm) {
    q_layernorm_.emplace(c, parallel::tp_size(pc) > 1, options.tensor_options, c.kv_channels);
    k_layernorm_.emplace(c, parallel::tp_size(pc) > 1, options.tensor_options, c.kv_channels);
  }
}

void SelfAttention::normalize_qk(at::Tensor& q, at::Tensor& k) const {
  if (!q_layernorm_) return;
  q = q_layernorm_->forward(q.contiguous());
  k = k_layernorm_->forward(k.contiguous());
}

at::Tensor SelfAttention::apply_rotary(const at::Tensor& t, const at::Tensor& freqs) const {
  // --no-rope-fusion: autograd through the plain ATen rotation instead of the fused op.
  return config_.apply_rope_fusion ? kernels::ops::rope(t, freqs, config_.rotary_interleaved)
                                   : kernels::rope_forward_reference(t, freqs, config_.rotary_interleaved);
}

at::Tensor SelfAttention::sdpa_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                         const ForwardContext& ctx) const {
  const double p = ctx.training ? config_.attention_dropout : 0.0;
  // On the CPU LibTorch has one fused kernel of its own: flash and fused both mean it there.
  const auto backend = !q.is_cuda() ? kernels::aten::AttentionBackend::kAuto
                       : config_.attention_backend == AttentionBackend::kFlash ? kernels::aten::AttentionBackend::kFlash
                       : config_.attention_backend == AttentionBackend::kFused ? kernels::aten::AttentionBackend::kCudnn
                                                                               : kernels::aten::AttentionBackend::kAuto;
  const DefaultGeneratorFork fork(p > 0.0 ? ctx.model_parallel_gen : nullptr, q.device());
  const at::Tensor out = kernels::aten::causal_self_attention(q, k, v, p, std::nullopt, backend);  // [s, b, np, hn]
  return out.view({out.size(0), out.size(1), -1});
}

at::Tensor SelfAttention::explicit_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                             const at::Tensor& mask, const ForwardContext& ctx) const {
  const int64_t s = q.size(0), b = q.size(1), np = q.size(2), hn = q.size(3), ng = k.size(2), per_group = np / ng;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hn));
  // The query heads of a group stacked along the rows: [b, ng, per_group * s, hn], so each group's
  // K and V serve all of its heads in one batched product without being repeated.
  const at::Tensor qg =
      q.reshape({s, b, ng, per_group, hn}).permute({1, 2, 3, 0, 4}).reshape({b, ng, per_group * s, hn});
  const at::Tensor kg = k.permute({1, 2, 3, 0});  // [b, ng, hn, s]
  const at::Tensor vg = v.permute({1, 2, 0, 3});  // [b, ng, s, hn]
  const at::Tensor scores = kernels::ops::matmul(qg, kg).view({b * np, s, s});
  at::Tensor probs;
  if (mask.defined()) {
    // Megatron's ScaledMaskedSoftmax: masked scores set to -10000, softmax in fp32.
    const at::Tensor masked = (scores.view({b, np, s, s}).to(at::kFloat) * scale).masked_fill(mask, -10000.0);
    probs = at::softmax(masked, -1).to(q.scalar_type()).view({b * np, s, s});
  } else if (config_.masked_softmax_fusion) {
    probs = kernels::ops::causal_softmax(scores, scale);
  } else {
    probs = kernels::causal_softmax_forward_reference(scores, scale);  // --no-masked-softmax-fusion
  }
  probs = dropout(probs, config_.attention_dropout, ctx, ctx.model_parallel_gen);
  const at::Tensor context = kernels::ops::matmul(probs.view({b, ng, per_group * s, s}), vg);  // [b, ng, per_group*s, hn]
  return context.view({b, ng, per_group, s, hn}).permute({3, 0, 1, 2, 4}).reshape({s, b, np * hn});
}

at::Tensor SelfAttention::core_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                         const at::Tensor& mask, const ForwardContext& ctx) const {
  if (!mask.defined() && uses_sdpa(config_.attention_backend, q.device())) return sdpa_attention(q, k, v, ctx);
  return explicit_attention(q, k, v, mask, ctx);
}

std::pair<at::Tensor, at::Tensor> SelfAttention::forward(const at::Tensor& x, const at::Tensor& mask,
                                                         const ForwardContext& ctx) const {
  // [s, b, ng/tp * (np/ng + 2) * hn]: each local group's query heads, then its key, then its value
  // (the whole sequence: under sequence parallelism linear_qkv gathers it).
  const at::Tensor qkv = linear_qkv_.forward(x);
  auto attend = [this, mask, ctx](const at::Tensor& qkv_in) {
    const int64_t np = local_heads_, ng = local_groups_, hn = config_.kv_channels, per_group = np / ng;
    const int64_t s = qkv_in.size(0), b = qkv_in.size(1);
    const auto parts = qkv_in.view({s, b, ng, (per_group + 2) * hn}).split_with_sizes({per_group * hn, hn, hn}, -1);
    at::Tensor q = parts[0].reshape({s, b, np, hn});
    at::Tensor k = parts[1];  // [s, b, ng, hn]
    at::Tensor v = parts[2];
    normalize_qk(q, k);
    const parallel::ParallelContext* cp = context_parallel_;
    if (config_.position_embedding == PositionEmbedding::kRope) {
      at::Tensor freqs;
      if (cp == nullptr) {
        freqs = kernels::rope_freqs(s, config_.rotary_dim(), config_.rotary_base, config_.rotary_interleaved,
                                    qkv_in.device());
      } else {  // the angles of this rank's global positions
        const std::int64_t whole = s * cp->state->cp();
        freqs = kernels::rope_freqs(whole, config_.rotary_dim(), config_.rotary_base, config_.rotary_interleaved,
                                    qkv_in.device())
                    .index_select(0, parallel::cp_local_positions(whole, cp->state->cp(), cp->state->cp_rank(),
                                                                  qkv_in.device()));
      }
      q = apply_rotary(q, freqs);
      k = apply_rotary(k, freqs);
    }
    if (cp != nullptr) {
      const double p = ctx.training ? config_.attention_dropout : 0.0;
      const DefaultGeneratorFork fork(p > 0.0 ? ctx.model_parallel_gen : nullptr, q.device());
      return parallel::context_parallel_attention(q.contiguous(), k.contiguous(), v.contiguous(),
                                                  1.0 / std::sqrt(static_cast<double>(hn)), p,
                                                  config_.cp_all_gather ? parallel::CpCommType::kAllGather
                                                                        : parallel::CpCommType::kP2P,
                                                  *cp);
    }
    return core_attention(q, k.contiguous(), v.contiguous(), mask, ctx);
  };
  // --recompute-granularity selective: the attention core is recomputed in the backward.
  const at::Tensor context = config_.recompute_granularity == RecomputeGranularity::kSelective && ctx.training
                                 ? recompute(attend, qkv, {ctx.model_parallel_gen})
                                 : attend(qkv);
  return {linear_proj_.forward(context), linear_proj_.bias()};
}

std::pair<at::Tensor, at::Tensor> SelfAttention::forward_cached(const at::Tensor& x, at::Tensor& keys,
                                                                at::Tensor& values) const {
  const at::Tensor qkv = linear_qkv_.forward(x);
  const int64_t np = local_heads_, ng = local_groups_, hn = config_.kv_channels, per_group = np / ng;
  const int64_t s = qkv.size(0), b = qkv.size(1);
  const int64_t past = keys.defined() ? keys.size(0) : 0;
  const auto parts = qkv.view({s, b, ng, (per_group + 2) * hn}).split_with_sizes({per_group * hn, hn, hn}, -1);
  at::Tensor q = parts[0].reshape({s, b, np, hn});
  at::Tensor k = parts[1].contiguous();
  normalize_qk(q, k);
  if (config_.position_embedding == PositionEmbedding::kRope) {
    // The angles of positions [past, past + s).
    const at::Tensor freqs = kernels::rope_freqs(past + s, config_.rotary_dim(), config_.rotary_base,
                                                 config_.rotary_interleaved, qkv.device())
                                 .narrow(0, past, s)
                                 .contiguous();
    q = apply_rotary(q, freqs);
    k = apply_rotary(k, freqs);
  }
  keys = past > 0 ? at::cat({keys, k}, 0) : k;
  values = past > 0 ? at::cat({values, parts[2]}, 0) : parts[2].contiguous();
  const int64_t total = past + s;
  // As explicit_attention: a group's query heads stacked along the rows, [b, ng, per_group * s,
  // hn] against its cached keys [b, ng, hn, total], so the cache is never repeated per head.
  const at::Tensor qg =
      q.reshape({s, b, ng, per_group, hn}).permute({1, 2, 3, 0, 4}).reshape({b, ng, per_group * s, hn});
  const double scale = 1.0 / std::sqrt(static_cast<double>(hn));
  at::Tensor scores = kernels::ops::matmul(qg, keys.permute({1, 2, 3, 0})).to(at::kFloat) * scale;  // softmax in fp32
  // Row j * s + i is query position past + i: it sees the keys up to itself.
  const auto longs = at::TensorOptions().dtype(at::kLong).device(x.device());
  const at::Tensor query_pos = at::arange(past, total, longs).repeat({per_group});
  const at::Tensor key_pos = at::arange(total, longs);
  scores = scores.masked_fill(key_pos.view({1, total}) > query_pos.view({per_group * s, 1}),
                              -std::numeric_limits<float>::infinity());
  const at::Tensor probs = at::softmax(scores, -1).to(q.scalar_type());
  const at::Tensor context = kernels::ops::matmul(probs, values.permute({1, 2, 0, 3}))  // [b, ng, per_group * s, hn]
                                 .view({b, ng, per_group, s, hn})
                                 .permute({3, 0, 1, 2, 4})
                                 .reshape({s, b, np * hn});
  return {linear_proj_.forward(context), linear_proj_.bias()};
}

// Megatron-Core registers linear_proj (Attention.__init__) before linear_qkv (SelfAttention), so
// its parameter order, and with it the data-parallel bucket layout, lists the projection first.
void SelfAttention::collect(const std::string& prefix, ParameterList& out) const {
  linear_proj_.collect(prefix + kProj, out);
  linear_qkv_.collect(prefix + kQkv, out);
  if (q_layernorm_) {
    q_layernorm_->collect(prefix + "q_layernorm.", out);
    k_layernorm_->collect(prefix + "k_layernorm.", out);
  }
}

}  // namespace megatron::model
