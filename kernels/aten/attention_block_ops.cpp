// One block of attention with its log-sum-exp (see attention_block_ops.h): LibTorch's fused
// kernels where they run the inputs, the explicit reference elsewhere. The fused CUDA entries are
// plain ATen operators, so this file compiles in every LibTorch build; only CUDA tensors reach them.
#include "megatron/kernels/aten/attention_block_ops.h"

#include <ATen/Context.h>

#include <limits>

#include "megatron/core/check.h"

namespace megatron::kernels::aten {
namespace {

enum class Backend { kFlash, kEfficient, kCpuFlash, kExplicit };

Backend backend_of(const at::Tensor& q, double dropout_p) {
  const at::ScalarType t = q.scalar_type();
  if (q.is_cuda()) {
    const std::int64_t d = q.size(-1);
    if ((t == at::kBFloat16 || t == at::kHalf) && d <= 256 && d % 8 == 0) return Backend::kFlash;
    if (t == at::kFloat || t == at::kBFloat16 || t == at::kHalf) return Backend::kEfficient;
    return Backend::kExplicit;
  }
  if (dropout_p == 0.0 && (t == at::kFloat || t == at::kBFloat16 || t == at::kHalf)) return Backend::kCpuFlash;
  return Backend::kExplicit;
}

// The memory-efficient kernel keeps its log-sum-exp rows padded to a multiple of this.
constexpr std::int64_t kEfficientLseRows = 32;

at::ScalarType accumulation_type(const at::Tensor& t) { return t.scalar_type() == at::kDouble ? at::kDouble : at::kFloat; }

void validate(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double dropout_p) {
  MEGATRON_CHECK(q.dim() == 4 && k.dim() == 4 && k.sizes() == v.sizes() && q.size(0) == k.size(0) &&
                     q.size(1) == k.size(1) && q.size(3) == k.size(3),
                 "attention block: q must be [b, heads, s_q, d] and k, v [b, heads, s_k, d]; got q ", q.sizes(), ", k ",
                 k.sizes(), ", v ", v.sizes());
  MEGATRON_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type() &&
                     k.device() == q.device() && v.device() == q.device(),
                 "attention block: q, k and v must share dtype and device");
  MEGATRON_CHECK(dropout_p >= 0.0 && dropout_p < 1.0, "attention block: dropout_p must be in [0, 1), got ", dropout_p);
}

// The causal mask of a [s_q, s_k] block: true where key j > query i.
at::Tensor future_of(std::int64_t s_q, std::int64_t s_k, const at::Device& device) {
  return at::ones({s_q, s_k}, at::TensorOptions().dtype(at::kBool).device(device)).triu(1);
}

// scale q k^T with the causal mask, in the accumulation type.
at::Tensor scores_of(const at::Tensor& q, const at::Tensor& k, bool causal, double scale) {
  const at::ScalarType acc = accumulation_type(q);
  at::Tensor s = at::matmul(q.to(acc), k.to(acc).transpose(-1, -2)).mul_(scale);
  if (causal) s.masked_fill_(future_of(q.size(2), k.size(2), q.device()), -std::numeric_limits<double>::infinity());
  return s;
}

// keep / (1 - p) for a dropout mask of `sizes` drawn from `gen`.
at::Tensor kept_scaled(at::IntArrayRef sizes, const at::TensorOptions& options, double p, at::Generator gen) {
  return at::empty(sizes, options).bernoulli_(1.0 - p, gen).div_(1.0 - p);
}

AttentionBlock explicit_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal, double scale,
                                double p) {
  const at::Tensor scores = scores_of(q, k, causal, scale);
  const at::Tensor lse = at::logsumexp(scores, -1);  // [b, h, s_q]
  // A row with no visible key (lse = -inf) has probabilities 0, not NaN.
  at::Tensor probs = at::exp(scores - lse.unsqueeze(-1)).nan_to_num_(0.0);
  BlockRng rng;
  if (p > 0.0) {
    // The state before the draw is what the backward starts a copy of the generator from (the
    // draw itself takes the generator's lock).
    at::Generator gen = at::globalContext().defaultGenerator(q.device());
    rng.seed = gen.get_state();
    probs.mul_(kept_scaled(probs.sizes(), probs.options(), p, gen));
  }
  return {at::matmul(probs, v.to(probs.scalar_type())).to(q.scalar_type()), lse, rng};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> explicit_backward(const at::Tensor& dout, const at::Tensor& q,
                                                                 const at::Tensor& k, const at::Tensor& v,
                                                                 const at::Tensor& out, const at::Tensor& lse,
                                                                 const BlockRng& rng, bool causal, double scale,
                                                                 double p) {
  const at::ScalarType acc = accumulation_type(q);
  const at::Tensor g = dout.to(acc), qa = q.to(acc), ka = k.to(acc), va = v.to(acc);
  // The probabilities under the whole row's normaliser, and the same mask the forward drew.
  const at::Tensor probs = at::exp(scores_of(q, k, causal, scale) - lse.to(acc).unsqueeze(-1)).nan_to_num_(0.0);
  at::Tensor weights = probs;  // what multiplied v in the forward
  at::Tensor dprobs = at::matmul(g, va.transpose(-1, -2));
  if (p > 0.0) {
    MEGATRON_CHECK(rng.seed.defined(), "attention block backward: dropout without the forward's generator state");
    at::Generator gen = at::globalContext().defaultGenerator(q.device()).clone();
    gen.set_state(rng.seed);
    const at::Tensor keep = kept_scaled(probs.sizes(), probs.options(), p, gen);
    weights = probs * keep;
    dprobs.mul_(keep);
  }
  // softmax's backward with the row term sum_j P_ij dP_ij = dout_i . out_i (which holds with dropout).
  const at::Tensor row = (g * out.to(acc)).sum(-1, /*keepdim=*/true);
  const at::Tensor dscores = probs * (dprobs - row) * scale;
  return {at::matmul(dscores, ka).to(q.scalar_type()), at::matmul(dscores.transpose(-1, -2), qa).to(q.scalar_type()),
          at::matmul(weights.transpose(-1, -2), g).to(q.scalar_type())};
}

}  // namespace

const char* attention_block_backend(const at::Tensor& q, double dropout_p) {
  switch (backend_of(q, dropout_p)) {
    case Backend::kFlash: return "flash";
    case Backend::kEfficient: return "efficient";
    case Backend::kCpuFlash: return "cpu_flash";
    case Backend::kExplicit: return "explicit";
  }
  return "?";
}

AttentionBlock attention_block_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                                       double scale, double dropout_p) {
  validate(q, k, v, dropout_p);
  switch (backend_of(q, dropout_p)) {
    case Backend::kFlash: {
      auto r = at::_scaled_dot_product_flash_attention(q, k, v, dropout_p, causal, /*return_debug_mask=*/false, scale);
      return {std::get<0>(r), std::get<1>(r), {std::get<6>(r), std::get<7>(r)}};
    }
    case Backend::kEfficient: {
      auto [out, lse, seed, offset] = at::_scaled_dot_product_efficient_attention(
          q, k, v, /*attn_bias=*/{}, /*compute_log_sumexp=*/true, dropout_p, causal, scale);
      return {out, lse.narrow(2, 0, q.size(2)), {seed, offset}};
    }
    case Backend::kCpuFlash: {
      auto [out, lse] = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, {}, scale);
      return {out, lse, {}};
    }
    case Backend::kExplicit: return explicit_forward(q, k, v, causal, scale, dropout_p);
  }
  MEGATRON_FAIL("attention block: no back end");
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_block_backward(const at::Tensor& dout, const at::Tensor& q,
                                                                        const at::Tensor& k, const at::Tensor& v,
                                                                        const at::Tensor& out, const at::Tensor& lse,
                                                                        const BlockRng& rng, bool causal, double scale,
                                                                        double dropout_p) {
  validate(q, k, v, dropout_p);
  switch (backend_of(q, dropout_p)) {
    case Backend::kFlash: {
      // Cumulative lengths and maxima are for variable-length batches; a dense block has none.
      const std::int64_t s_q = q.size(2), s_k = k.size(2);
      return at::_scaled_dot_product_flash_attention_backward(dout, q, k, v, out, lse, at::Tensor(), at::Tensor(), s_q,
                                                              s_k, dropout_p, causal, rng.seed, rng.offset, scale);
    }
    case Backend::kEfficient: {
      const std::int64_t rows = q.size(2);
      const std::int64_t padded = (rows + kEfficientLseRows - 1) / kEfficientLseRows * kEfficientLseRows;
      at::Tensor lse_padded = at::zeros({lse.size(0), lse.size(1), padded}, lse.options().dtype(at::kFloat));
      lse_padded.narrow(2, 0, rows).copy_(lse);
      auto [dq, dk, dv, dbias] = at::_scaled_dot_product_efficient_attention_backward(
          dout, q, k, v, /*attn_bias=*/at::Tensor(), out, lse_padded, rng.seed, rng.offset, dropout_p,
          {true, true, true, false}, causal, scale);
      return {dq, dk, dv};
    }
    case Backend::kCpuFlash:
      return at::_scaled_dot_product_flash_attention_for_cpu_backward(dout, q, k, v, out, lse, 0.0, causal, {}, scale);
    case Backend::kExplicit: return explicit_backward(dout, q, k, v, out, lse, rng, causal, scale, dropout_p);
  }
  MEGATRON_FAIL("attention block: no back end");
}

}  // namespace megatron::kernels::aten
