// Counter-based N(0, std) draws for parameter initialisation: the value of element i of a
// stream depends on the stream's key and i alone (definition in counter_normal.h), so each rank
// draws exactly the elements of its shard, on its device, and every layout holds the same full
// tensor. CPU tensors: counter_normal_cpu.cpp over at::parallel_for; CUDA tensors (in a build with
// the kernels): counter_normal.cu; both the same bits.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "megatron/kernels/shard_runs.h"

namespace megatron::kernels {

// Fills `out` (fp32, contiguous, runs.numel() elements, CPU or CUDA) with the values of the stream
// `key` at the full-tensor indices of `runs`, times `std`.
void fill_counter_normal(at::Tensor& out, std::uint64_t key, double std, const ShardRuns& runs);

// Element i of the stream `key` at std 1, computed on the CPU by the definition: for tests.
float counter_normal_value(std::uint64_t key, std::uint64_t i);

}  // namespace megatron::kernels
