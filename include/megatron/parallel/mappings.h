// The tensor-parallel regions (Megatron's tensor_parallel/mappings.py): autograd functions whose
// forward and backward are one collective each over the TP group of a ParallelContext. They are
// the only places model code communicates. Each is the identity, with no communicator call, when
// the TP group has one rank. Sequence-parallel regions work on dim 0 of [s, b, h] activations;
// the others on the last dim. Sizes must divide by the TP size (checked, with a message).
#pragma once

#include <ATen/core/Tensor.h>

#include "megatron/parallel/parallel_context.h"

namespace megatron::parallel {

// Forward: identity; backward: all-reduce (sum).
at::Tensor copy_to_tensor_parallel_region(const at::Tensor& x, const ParallelContext& pc);
// Forward: all-reduce (sum); backward: identity.
at::Tensor reduce_from_tensor_parallel_region(const at::Tensor& x, const ParallelContext& pc);
// Forward: keep this rank's chunk of the last dim; backward: all-gather along the last dim.
at::Tensor scatter_to_tensor_parallel_region(const at::Tensor& x, const ParallelContext& pc);
// Forward: all-gather along the last dim; backward: keep this rank's chunk of the last dim.
at::Tensor gather_from_tensor_parallel_region(const at::Tensor& x, const ParallelContext& pc);

// Forward: keep this rank's chunk of dim 0; backward: all-gather along dim 0.
at::Tensor scatter_to_sequence_parallel_region(const at::Tensor& x, const ParallelContext& pc);
// Forward: all-gather along dim 0; backward: reduce-scatter along dim 0.
at::Tensor gather_from_sequence_parallel_region(const at::Tensor& x, const ParallelContext& pc);
// Forward: reduce-scatter along dim 0; backward: all-gather along dim 0.
at::Tensor reduce_scatter_to_sequence_parallel_region(const at::Tensor& x, const ParallelContext& pc);

}  // namespace megatron::parallel
