// Where a tensor's shard sits in the full tensor, as runs of consecutive full-tensor elements:
// what a kernel needs to draw a shard of a counter-based stream (counter_normal.h) without its
// neighbours. Plain C++ usable on the host and in CUDA device code.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define MEGATRON_HOST_DEVICE __host__ __device__
#else
#define MEGATRON_HOST_DEVICE
#endif

namespace megatron::kernels {

// A tensor's shard as runs of consecutive elements of the full tensor, stored one after another:
// run q starts at full index (q / runs_per_block) * block_stride + (q % runs_per_block) * run_stride
// + base and has run_length elements.
struct ShardRuns {
  int64_t runs = 1;
  int64_t run_length = 0;
  int64_t runs_per_block = 1;
  int64_t block_stride = 0;
  int64_t run_stride = 0;
  int64_t base = 0;

  MEGATRON_HOST_DEVICE int64_t numel() const { return runs * run_length; }
  // The full-tensor index of the shard's element j.
  MEGATRON_HOST_DEVICE int64_t full_index(int64_t j) const {
    const int64_t q = j / run_length;
    return (q / runs_per_block) * block_stride + (q % runs_per_block) * run_stride + base + j % run_length;
  }
};

}  // namespace megatron::kernels
