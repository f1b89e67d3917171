// One block of attention with its log-sum-exp: the unit that context-parallel attention computes
// per step and merges (out = sum_i exp(lse_i - lse) out_i). Forward and backward are separate
// calls (not autograd): the caller merges blocks and hands each block's backward the merged
// output and log-sum-exp of its rows, which makes every block's gradient exact.
//
// Back ends, by device and dtype:
// - CUDA, bf16/fp16, head dim <= 256 and a multiple of 8: LibTorch's FlashAttention-2
//   (_scaled_dot_product_flash_attention and its backward);
// - CUDA otherwise (fp32): LibTorch's memory-efficient attention (CUTLASS), whose log-sum-exp rows
//   are padded to a multiple of 32 (trimmed here, padded again for its backward);
// - CPU without dropout: ATen's CPU flash attention (_scaled_dot_product_flash_attention_for_cpu);
// - CPU with dropout (ATen's CPU kernel has none), and float64 anywhere: the explicit reference
//   below, softmax(scale q k^T) in fp32 (float64 for float64), which is also what the tests compare
//   the fused back ends with.
// Dropout masks the probabilities as the fused kernels do (kept entries scaled by 1 / (1 - p); the
// log-sum-exp is that of the undropped scores). Masks come from the device's default generator,
// which the caller forks to the stream it wants (Megatron's model-parallel RNG tracker); the block
// keeps what its backward needs to draw the same mask again (the kernels' Philox seed and offset,
// or the generator's state before the draw), without touching the default generator there.
#pragma once

#include <ATen/ATen.h>

#include <tuple>

namespace megatron::kernels::aten {

// How a block's dropout mask is drawn again: the fused kernels' (seed, offset) tensors, or the
// default generator's state before the explicit path drew it (in `seed`). Empty without dropout.
struct BlockRng {
  at::Tensor seed, offset;
};

struct AttentionBlock {
  at::Tensor out;  // [b, heads, s_q, d], q's dtype
  at::Tensor lse;  // [b, heads, s_q], fp32 (float64 for float64 inputs); -inf for a row that sees no key
  BlockRng rng;
};

// Which implementation attention_block_forward/backward run for these inputs (for tests and logs):
// "flash", "efficient", "cpu_flash" or "explicit".
const char* attention_block_backend(const at::Tensor& q, double dropout_p);

// softmax(scale q k^T [+ causal mask]) v for q [b, heads, s_q, d] and k, v [b, heads, s_k, d] (one
// dtype and device, contiguous; grouped-query callers repeat K/V to the query heads). causal masks
// key j > query i (top-left aligned: square blocks are what context parallelism asks for).
AttentionBlock attention_block_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                                       double scale, double dropout_p = 0.0);

// (dq, dk, dv) of a block in the inputs' dtype, given the output gradient `dout` and the final
// output `out` and log-sum-exp `lse` of the rows (the whole attention's, after merging: [b, heads,
// s_q] fp32), and the block's own rng. The arguments are the forward's, with the same causal,
// scale and dropout_p.
std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_block_backward(const at::Tensor& dout, const at::Tensor& q,
                                                                        const at::Tensor& k, const at::Tensor& v,
                                                                        const at::Tensor& out, const at::Tensor& lse,
                                                                        const BlockRng& rng, bool causal, double scale,
                                                                        double dropout_p = 0.0);

}  // namespace megatron::kernels::aten
