// Counter-based normal draws (see counter_normal.h): one thread per output element, with the
// arithmetic of counter_normal_math.h that the CPU also runs (this file is compiled with
// -fmad=false), so a GPU draws the CPU's bits. Each thread computes its element's four Philox
// words alone: a few dozen integer operations, and no element depends on which thread draws it.
#include <cuda_runtime.h>

#include "common.cuh"
#include "megatron/kernels/counter_normal.h"
#include "megatron/kernels/counter_normal_math.h"
#include "megatron/kernels/cuda_check.h"

namespace megatron::kernels {
namespace {

namespace math = counter_normal_math;

__global__ void counter_normal_kernel(CounterNormalParams p) {
  const int64_t n = p.runs.numel();
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < n;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t i = static_cast<uint64_t>(p.runs.full_index(j));
    const uint64_t group = i >> 2;
    uint32_t c0 = static_cast<uint32_t>(group), c1 = static_cast<uint32_t>(group >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = static_cast<uint32_t>(p.key), k1 = static_cast<uint32_t>(p.key >> 32);
    for (int round = 0; round < 10; ++round) {
      math::philox_round(c0, c1, c2, c3, k0, k1);
      k0 += math::kPhiloxWeyl0;
      k1 += math::kPhiloxWeyl1;
    }
    const bool second = (i & 2) != 0;
    const float radius = math::box_muller_radius(second ? c2 : c0);
    float s, c;
    math::sincos_turns(static_cast<int32_t>((second ? c3 : c1) >> 8), s, c);
    const float z = radius * ((i & 1) != 0 ? s : c);
    p.out[j] = p.std * z;
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
