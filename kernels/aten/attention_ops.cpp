// Causal self-attention through at::scaled_dot_product_attention with back-end selection, and the
// plain ATen reference (see attention_ops.h). Inputs [s, b, heads, hn] are viewed as SDPA's
// [b, heads, s, hn] without a copy; the output is made contiguous in [s, b, heads, hn].
#include "megatron/kernels/aten/attention_ops.h"

#include <ATen/Context.h>

#include <cmath>
#include <limits>

#include "megatron/core/check.h"

namespace megatron::kernels::aten {
namespace {

void validate(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double dropout_p, const char* who) {
  MEGATRON_CHECK(q.defined() && k.defined() && v.defined(), who, ": q, k and v must be defined");
  MEGATRON_CHECK(q.dim() == 4, who, ": q must be [s, b, heads, hn]; got shape ", q.sizes());
  MEGATRON_CHECK(k.dim() == 4 && v.sizes() == k.sizes() && k.size(0) == q.size(0) && k.size(1) == q.size(1) &&
                     k.size(3) == q.size(3) && k.size(2) > 0 && q.size(2) % k.size(2) == 0,
                 who, ": k and v must be [s, b, groups, hn] with the heads of q a multiple of the groups; got q ",
                 q.sizes(), ", k ", k.sizes(), ", v ", v.sizes());
  MEGATRON_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(), who,
                 ": q, k and v must have one dtype; got ", q.scalar_type(), ", ", k.scalar_type(), ", ", v.scalar_type());
  MEGATRON_CHECK(k.device() == q.device() && v.device() == q.device(), who, ": q, k and v must be on one device; got ",
                 q.device(), ", ", k.device(), ", ", v.device());
  MEGATRON_CHECK(dropout_p >= 0.0 && dropout_p < 1.0, who, ": dropout_p must be in [0, 1); got ", dropout_p);
}

// [s, b, heads, hn] -> [b, heads, s, hn] view.
at::Tensor to_bhsd(const at::Tensor& x) { return x.permute({1, 2, 0, 3}); }

// [b, heads, s, hn] -> contiguous [s, b, heads, hn].
at::Tensor to_sbhd(const at::Tensor& x) { return x.permute({2, 0, 1, 3}).contiguous(); }

// Enables exactly one SDP back end for its lifetime and restores the previous flags after.
class SdpBackendGuard {
 public:
  explicit SdpBackendGuard(AttentionBackend backend)
      : ctx_(at::globalContext()),
        flash_(ctx_.userEnabledFlashSDP()),
        efficient_(ctx_.userEnabledMemEfficientSDP()),
        math_(ctx_.userEnabledMathSDP()),
        cudnn_(ctx_.userEnabledCuDNNSDP()),
        active_(backend != AttentionBackend::kAuto) {
    if (!active_) return;
    ctx_.setSDPUseFlash(backend == AttentionBackend::kFlash);
    ctx_.setSDPUseMemEfficient(backend == AttentionBackend::kEfficient);
    ctx_.setSDPUseMath(backend == AttentionBackend::kMath);
    ctx_.setSDPUseCuDNN(backend == AttentionBackend::kCudnn);
  }
  ~SdpBackendGuard() {
    if (!active_) return;
    ctx_.setSDPUseFlash(flash_);
    ctx_.setSDPUseMemEfficient(efficient_);
    ctx_.setSDPUseMath(math_);
    ctx_.setSDPUseCuDNN(cudnn_);
  }
  SdpBackendGuard(const SdpBackendGuard&) = delete;
  SdpBackendGuard& operator=(const SdpBackendGuard&) = delete;

 private:
  at::Context& ctx_;
  bool flash_, efficient_, math_, cudnn_, active_;
};

}  // namespace

const char* attention_backend_name(AttentionBackend backend) {
  switch (backend) {
    case AttentionBackend::kAuto: return "auto";
    case AttentionBackend::kFlash: return "flash";
    case AttentionBackend::kCudnn: return "cudnn";
    case AttentionBackend::kEfficient: return "efficient";
    case AttentionBackend::kMath: return "math";
  }
  return "?";
}

at::Tensor causal_self_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double dropout_p,
                                 std::optional<double> scale, AttentionBackend backend) {
  validate(q, k, v, dropout_p, "causal_self_attention");
  MEGATRON_CHECK(q.is_cuda() || backend == AttentionBackend::kAuto || backend == AttentionBackend::kMath,
                 "causal_self_attention: back end ", attention_backend_name(backend),
                 " needs CUDA tensors; q is on ", q.device(), " (use auto or math)");
  const SdpBackendGuard guard(backend);
  const bool gqa = k.size(2) != q.size(2);  // K/V shared by groups of query heads, not repeated
  const at::Tensor out = at::scaled_dot_product_attention(to_bhsd(q), to_bhsd(k), to_bhsd(v), /*attn_mask=*/{},
                                                          dropout_p, /*is_causal=*/true, scale, gqa);
  return to_sbhd(out);
}

at::Tensor causal_self_attention_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                           double dropout_p, std::optional<double> scale) {
  validate(q, k, v, dropout_p, "causal_self_attention_reference");
  const int64_t s = q.size(0);
  const double softmax_scale = scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(3))));
  const int64_t repeat = q.size(2) / k.size(2);  // query heads per K/V group
  const at::Tensor kh = to_bhsd(k).repeat_interleave(repeat, 1), vh = to_bhsd(v).repeat_interleave(repeat, 1);
  const at::Tensor qh = to_bhsd(q);                                              // [b, heads, s, hn]
  const at::Tensor scores = at::matmul(qh, kh.transpose(-2, -1)) * softmax_scale;  // [b, heads, s, s]
  const at::Tensor future = at::ones({s, s}, q.options().dtype(at::kBool)).triu(1);
  const at::Tensor masked = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  const at::ScalarType softmax_type = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor probs = at::softmax(masked, -1, softmax_type).to(q.scalar_type());
  if (dropout_p > 0.0) probs = at::dropout(probs, dropout_p, /*train=*/true);
  return to_sbhd(at::matmul(probs, vh));
}

}  // namespace megatron::kernels::aten
