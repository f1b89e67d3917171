// Counter-based normal draws on raw device pointers (the CUDA half of aten/init_ops.h): element i
// of the stream `key` is a function of (key, i) alone, so any part of a tensor is drawn without
// the rest. The definition (the same on CPU, see aten/init_ops.h):
//   words w0..w3 = Philox4x32-10(counter = {lo(i / 4), hi(i / 4), 0, 0}, key = {lo(key), hi(key)})
//   (a, b)       = (w0, w1) for i % 4 in {0, 1}, (w2, w3) for i % 4 in {2, 3}
//   u = ((a >> 8) + 1) 2^-24 in (0, 1],  v = (b >> 8) 2^-24 in [0, 1)
//   z = sqrt(-2 ln u) cos(2 pi v) for even i, sqrt(-2 ln u) sin(2 pi v) for odd i   (Box-Muller)
//   value = std * z, in fp32,
// with ln, sin and cos as counter_normal_math.h computes them: the CPU and this kernel run the same
// IEEE operations, so they draw the same bits.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "megatron/kernels/shard_runs.h"

namespace megatron::kernels {

struct CounterNormalParams {
  float* out = nullptr;  // numel() contiguous fp32 values, on the device
  ShardRuns runs;
  uint64_t key = 0;
  float std = 1.0f;
};

// Launch on `stream`. Throws megatron::Error on invalid parameters or a launch failure.
void launch_counter_normal(const CounterNormalParams& params, cudaStream_t stream);

}  // namespace megatron::kernels
