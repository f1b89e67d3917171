// Context parallelism: each sequence split over the CP group as Megatron splits it, and causal
// attention across the split.
//
// The split (Megatron's get_batch_on_this_cp_rank): a sequence of S positions is cut into 2 x CP
// chunks of S / (2 CP); CP rank r holds chunks r and 2 CP - 1 - r, in that order. Under a causal
// mask the early chunks attend to little and the late ones to much; pairing them gives every rank
// the same work.
//
// Attention (--cp-comm-type p2p, the ring): each rank starts from its own keys and values and
// passes them to the next CP rank, CP - 1 times, so that every rank sees every rank's; the next
// exchange runs while the current block is computed. Blocks are combined by their log-sum-exp:
// out = sum_i exp(lse_i - lse) out_i, lse = log sum_i exp(lse_i). With the split above, the block
// of the rank's own keys is causal; a block from an earlier rank (r - i >= 0) is attended to by all
// local queries but only its first chunk is earlier than them; a block from a later rank is
// attended to, in full, only by the second local chunk. Every off-diagonal step is half a block,
// unmasked. The backward pass runs the same ring again: the query gradient stays, the key and
// value gradients of the block a rank holds travel with it and arrive, complete, at its owner after
// the last step. Each block is kernels/aten/attention_block_ops.h: FlashAttention-2 or the
// memory-efficient kernel on CUDA tensors, ATen's CPU flash attention on CPU tensors (the explicit
// reference with dropout), all returning the log-sum-exp; the backward of a block takes the final
// output and log-sum-exp, so each block's gradient is exact. Grouped-query keys and values travel
// grouped (ng heads); each block repeats them to the query heads only for its own computation, and
// sums their gradients back per group before they travel. Attention dropout masks each block's
// probabilities as the fused kernels do (Megatron with Transformer Engine does the same per ring
// step); every block's mask is drawn again, identically, in the backward.
//
// --cp-comm-type all_gather: every rank gathers the keys and values of the whole sequence once,
// before its first block, and keeps them for the backward (CP x its own K/V of memory). Each
// local query chunk g attends to the chunks before it (unmasked) and to chunk g (causal), merged
// by log-sum-exp; the backward computes the gradients of all keys and values and returns each
// rank's share by a reduce-scatter.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string_view>

#include "megatron/parallel/parallel_context.h"

namespace megatron::parallel {

enum class CpCommType { kP2P, kAllGather };

// --cp-comm-type's value; throws megatron::Error naming the flag for a type this build lacks.
CpCommType parse_cp_comm_type(std::string_view name);

// This CP rank's part of `t` along `dim` (size S, divisible by 2 x cp): chunks cp_rank and
// 2 cp - 1 - cp_rank of 2 cp, concatenated.
at::Tensor cp_local_chunks(const at::Tensor& t, std::int64_t dim, int cp, int cp_rank);

// The global positions this CP rank holds of a sequence of `seq_length`, in local order (for RoPE
// and learned position embeddings).
at::Tensor cp_local_positions(std::int64_t seq_length, int cp, int cp_rank, const at::TensorOptions& options);

// Causal attention of this rank's queries over the keys and values of the whole sequence, held
// across `pc.cp`. q: [s_local, b, np, hn]; k, v: [s_local, b, ng, hn] (np a multiple of ng), all
// this rank's chunks as cp_local_chunks gives them. Returns [s_local, b, np * hn] in q's dtype;
// differentiable in q, k and v. `scale` multiplies the scores (1 / sqrt(hn) by default in
// Megatron). dropout_p drops attention probabilities with masks from the device's default
// generator (fork it to the model-parallel stream around the call). Every rank of the CP group must
// call it in the same order.
at::Tensor context_parallel_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                                      double dropout_p, CpCommType type, const ParallelContext& pc);

}  // namespace megatron::parallel
