// ATen-facing cross entropy from logits (spec 10.7), single-rank and vocab-parallel, without a
// softmax or an fp32 copy of the logits: the CUDA kernels for fp32/bf16/fp16 CUDA logits, the same
// arithmetic through ATen's fused row kernels (amax, log_softmax) otherwise (CPU ranks). The plain
// ATen references are what both are tested against.
//
// Vocab-parallel with ONE all-reduce: each TP rank r computes its shard's stats (max m_r, sum
// s_r = sum exp(x - m_r), target logit t_r, 0 unless the target is in the shard) and packs them
// into a zero tensor P [rows, 2*tp + 1] at columns 2r (m_r) and 2r + 1 (s_r), and t_r into the last
// column. An all-reduce SUM of P over the TP group is then exact (every entry has one non-zero
// contributor) and gives every rank all pieces, from which cross_entropy_combine_packed forms
// M = max_r m_r, S = sum_r s_r * exp(m_r - M) and loss = log(S) + M - t. The backward on each rank
// then needs only (M, S) and its own shard. The all-reduce is the caller's (an autograd region).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace megatron::kernels {

inline constexpr int64_t kCrossEntropyIgnoreIndex = -100;

// Per-row fp32 pieces of one vocabulary shard, each shaped like the target.
struct CrossEntropyStats {
  at::Tensor max;           // max over the shard
  at::Tensor sum_exp;       // sum over the shard of exp(x - max)
  at::Tensor target_logit;  // logit of the target if this shard owns it (and it is not ignored), else 0
};

// Per-row fp32 results, each shaped like the target; max and sum_exp are global and are what the
// backward needs.
struct CrossEntropyResult {
  at::Tensor loss;  // log(sum_exp) + max - target_logit; 0 where target == ignore_index
  at::Tensor max;
  at::Tensor sum_exp;
};

// logits [..., vocab_shard] (any float dtype; contiguous last dim preferred), target [...] global
// ids (integer). The shard covers ids [vocab_start, vocab_start + vocab_shard). Targets that are
// neither ignore_index nor inside the full vocabulary give an unspecified loss (no device sync
// checks them).
CrossEntropyStats cross_entropy_shard_stats(const at::Tensor& logits, const at::Tensor& target,
                                            int64_t vocab_start, int64_t ignore_index = kCrossEntropyIgnoreIndex);

// The one-all-reduce layout above: [rows, 2*tp_size + 1] fp32, zero outside rank tp_rank's slots.
at::Tensor cross_entropy_pack_stats(const CrossEntropyStats& stats, int64_t tp_rank, int64_t tp_size);

// packed: the all-reduced (summed) pack of every rank -> global loss, max and sum_exp, shaped like
// target. Works on any device (a few small ATen ops).
CrossEntropyResult cross_entropy_combine_packed(const at::Tensor& packed, const at::Tensor& target, int64_t tp_size,
                                                int64_t ignore_index = kCrossEntropyIgnoreIndex);

// The whole vocabulary on one rank, fused: loss, max and sum_exp in one pass over the logits.
CrossEntropyResult cross_entropy_forward(const at::Tensor& logits, const at::Tensor& target,
                                         int64_t ignore_index = kCrossEntropyIgnoreIndex);

// grad_loss (shaped like target, or broadcastable to it), the global max and sum_exp from the
// forward -> grad [..., vocab_shard] in the logits dtype: (softmax - onehot) * grad_loss, with the
// one-hot only on the shard that owns the target; 0 where target == ignore_index.
at::Tensor cross_entropy_backward(const at::Tensor& grad_loss, const at::Tensor& logits, const at::Tensor& target,
                                  const at::Tensor& max, const at::Tensor& sum_exp, int64_t vocab_start = 0,
                                  int64_t ignore_index = kCrossEntropyIgnoreIndex);

// Plain ATen references (fp32 math; any device).
CrossEntropyStats cross_entropy_shard_stats_reference(const at::Tensor& logits, const at::Tensor& target,
                                                      int64_t vocab_start,
                                                      int64_t ignore_index = kCrossEntropyIgnoreIndex);
CrossEntropyResult cross_entropy_forward_reference(const at::Tensor& logits, const at::Tensor& target,
                                                   int64_t ignore_index = kCrossEntropyIgnoreIndex);
at::Tensor cross_entropy_backward_reference(const at::Tensor& grad_loss, const at::Tensor& logits,
                                            const at::Tensor& target, const at::Tensor& max,
                                            const at::Tensor& sum_exp, int64_t vocab_start = 0,
                                            int64_t ignore_index = kCrossEntropyIgnoreIndex);

}  // namespace megatron::kernels
