// Causal self-attention behind our own interface: LibTorch's scaled dot product attention with a
// chosen back end (flash / cuDNN / memory-efficient / math), and a plain ATen reference (matmul,
// upper-triangular mask, softmax, matmul) that also runs on CPU. Backward through autograd for
// both. Layout is Megatron's sequence-first [s, b, heads, hn]; our own attention kernel comes later.
#pragma once

#include <ATen/ATen.h>

#include <optional>

namespace megatron::kernels::aten {

enum class AttentionBackend {
  kAuto,       // LibTorch's choice among the back ends enabled in at::globalContext()
  kFlash,      // FlashAttention-2 (CUDA, fp16/bf16, hn <= 256)
  kCudnn,      // cuDNN fused attention (CUDA, fp16/bf16)
  kEfficient,  // memory-efficient attention (CUDA, fp32/fp16/bf16)
  kMath,       // LibTorch's composite math path (any device and dtype)
};

const char* attention_backend_name(AttentionBackend backend);

// softmax(scale * q k^T + causal mask) v for q [s, b, heads, hn] and k, v [s, b, groups, hn] (same
// dtype and device; heads a multiple of groups: grouped-query attention, K/V not repeated where the
// back end allows), returned contiguous as [s, b, heads, hn] (view it as [s, b, heads * hn]). scale
// defaults to 1/sqrt(hn). dropout_p applies to the attention probabilities (0 for evaluation and
// tests). The chosen back end is the only one enabled during the call (LibTorch's process-wide SDP
// flags are set and restored around it: do not call this concurrently from several threads with
// different back ends); one that cannot run these inputs throws. Differentiable: gradients reach
// q, k and v through autograd, through the back end's own backward.
at::Tensor causal_self_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double dropout_p = 0.0,
                                 std::optional<double> scale = std::nullopt,
                                 AttentionBackend backend = AttentionBackend::kAuto);

// The plain reference: scores = scale * q k^T in the inputs' dtype, masked above the diagonal,
// softmax in fp32 then cast back, dropout, times v. Same layout and contract; differentiable.
at::Tensor causal_self_attention_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                           double dropout_p = 0.0, std::optional<double> scale = std::nullopt);

}  // namespace megatron::kernels::aten
