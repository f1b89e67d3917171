// The communication of expert parallelism: the variable-size all-to-all that Megatron's alltoall
// token dispatcher sends tokens to their experts' ranks with, as an autograd region (forward: rows
// to their destinations; backward: the gradient rows back to their sources, the same exchange
// with the splits swapped). Built from point-to-point sends and receives, so that it runs over
// MPI (CPU tensors) and NCCL (CUDA tensors) alike.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
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

}  // namespace megatron::parallel
