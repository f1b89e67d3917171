// Counter-based normal draws (see counter_normal.h): one thread per output element, Philox4x32-10
// from cuRAND, Box-Muller in fp32 with the accurate logf / sincosf. Each thread computes its
// element's four Philox words alone: the work is a few dozen integer operations, and no element
// depends on which thread or block draws it.
#include <cuda_runtime.h>
#include <curand_philox4x32_x.h>

#include "common.cuh"
#include "megatron/kernels/counter_normal.h"
#include "megatron/kernels/cuda_check.h"

namespace megatron::kernels {
namespace {

__global__ void counter_normal_kernel(CounterNormalParams p) {
  const int64_t n = p.runs.numel();
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < n;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t i = static_cast<uint64_t>(p.runs.full_index(j));
    const uint64_t group = i >> 2;
    const uint4 counter = make_uint4(static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32), 0u, 0u);
    const uint2 key = make_uint2(static_cast<uint32_t>(p.key), static_cast<uint32_t>(p.key >> 32));
    const uint4 w = curand_Philox4x32_10(counter, key);
    const bool second = (i & 2) != 0;
    const uint32_t a = second ? w.z : w.x;
    const uint32_t b = second ? w.w : w.y;
    const float u = static_cast<float>((a >> 8) + 1u) * 0x1p-24f;
    const float v = static_cast<float>(b >> 8) * 0x1p-24f;
    const float r = sqrtf(-2.0f * logf(u));
    float s, c;
    sincosf(6.28318530717958647692f * v, &s, &c);
    p.out[j] = p.std * (r * ((i & 1) != 0 ? s : c));
  }
}

}  // namespace

void launch_counter_normal(const CounterNormalParams& p, cudaStream_t stream) {
  MEGATRON_CHECK(p.out != nullptr || p.runs.numel() == 0, "counter_normal: null output");
  MEGATRON_CHECK(p.runs.runs >= 0 && p.runs.run_length >= 0 && p.runs.runs_per_block > 0,
                 "counter_normal: invalid shard runs");
  const int64_t n = p.runs.numel();
  if (n == 0) return;
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t{1} << 20);
  counter_normal_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(p);
  CHECK_CUDA(cudaGetLastError());
}

}  // namespace megatron::kernels
