// The communication of expert parallelism: the variable-size all-to-all that Megatron's alltoall
// token dispatcher sends tokens to their experts' ranks with, as an autograd region (forward: rows
// to their destinations; backward: the gradient rows back to their sources, the same exchange
// with the splits swapped), and the variable-size all-gather and reduce-scatter made of it. Built
// from point-to-point sends and receives, so that it runs over MPI (CPU tensors) and NCCL (CUDA
// tensors) alike. Also the MoE layers' bookkeeping collectives (counts, routing maps: no autograd),
// so that the model calls no communicator itself.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "megatron/parallel/communicator.h"

namespace megatron::parallel {

// Rows of `input` [sum(input_splits), ...] go to the group's ranks in order: the first
// input_splits[0] to group rank 0, the next input_splits[1] to group rank 1, ...; the result
// [sum(output_splits), ...] holds output_splits[j] rows from group rank j, in group order. Each
// rank's input_splits[j] must equal rank j's output_splits[this rank]. Differentiable in `input`.
// Every rank of the group calls it in the same order.
at::Tensor all_to_all(const at::Tensor& input, const std::vector<std::int64_t>& output_splits,
                      const std::vector<std::int64_t>& input_splits, const ProcessGroup& group, Communicator& comm);

// The same exchange as a variable-size all-gather along dim 0: rank j's `input` [sizes[j], ...] to
// every rank, concatenated in group order. Backward: each rank's rows of the gradient summed over
// the group back to it (a reduce-scatter). What Megatron's alltoall dispatcher gathers the tokens
// that reached the TP ranks of an expert with.
at::Tensor all_gather_rows(const at::Tensor& input, const std::vector<std::int64_t>& sizes, const ProcessGroup& group,
                           Communicator& comm);
// The inverse: `input` [sum(sizes), ...] holds a block of sizes[j] rows for each rank j; rank j
// gets its block summed over the group. Backward: an all-gather of the gradient blocks.
at::Tensor reduce_scatter_rows(const at::Tensor& input, const std::vector<std::int64_t>& sizes,
                               const ProcessGroup& group, Communicator& comm);

// The routers' and dispatchers' bookkeeping, which carries no gradient: token counts per expert,
// the routing map. Every rank of the groups calls them in the same order.
// `input` summed over each group of `groups` in turn (a null or one-rank group is skipped).
at::Tensor sum_bookkeeping(const at::Tensor& input, std::initializer_list<const ProcessGroup*> groups,
                           Communicator& comm);
// Every group rank's `input` (the same shape on all) concatenated along dim 0 in group order.
at::Tensor gather_bookkeeping(const at::Tensor& input, const ProcessGroup& group, Communicator& comm);

}  // namespace megatron::parallel
