// The counter-based normal stream on the CPU, vectorised by hand because it must be the same bits
// in every split of a tensor (and as the CUDA kernel's) and fast enough that a single process does
// not wait on it. libm's logf and sincosf are scalar calls (76 M values/s per thread here); the
// shared arithmetic of counter_normal_math.h in loops the compiler vectorises runs at 413 M/s, above
// LibTorch's own normal_ (bench_init).
//
// The work is done in aligned batches of 16 Philox blocks (64 elements), always whole: a vectorised
// body with a scalar tail would give an element different bits depending on where a shard's run
// starts. This file is compiled with -ffp-contract=off and -fno-math-errno, so each function clone
// below (AVX-512, AVX2, baseline x86-64) produces the same bits.
#include "counter_normal_cpu.h"

#include <algorithm>
#include <cstdint>

#include "megatron/kernels/counter_normal_math.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define MEGATRON_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MEGATRON_CPU_CLONES
#endif

namespace megatron::kernels::detail {

namespace math = counter_normal_math;

MEGATRON_CPU_CLONES void counter_normal_batch(std::uint64_t key, std::uint64_t batch, float* out) {
  constexpr int kGroups = kCounterNormalBatch / 4;  // Philox blocks per batch
  // Philox4x32-10 on the counters {lo(g), hi(g), 0, 0} of blocks g = 16 batch + lane.
  std::uint32_t c0[kGroups], c1[kGroups], c2[kGroups], c3[kGroups];
  for (int lane = 0; lane < kGroups; ++lane) {
    const std::uint64_t group = batch * kGroups + static_cast<std::uint64_t>(lane);
    c0[lane] = static_cast<std::uint32_t>(group);
    c1[lane] = static_cast<std::uint32_t>(group >> 32);
    c2[lane] = 0;
    c3[lane] = 0;
  }
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    for (int lane = 0; lane < kGroups; ++lane) math::philox_round(c0[lane], c1[lane], c2[lane], c3[lane], k0, k1);
    k0 += math::kPhiloxWeyl0;
    k1 += math::kPhiloxWeyl1;
  }
  // Box-Muller on the word pairs (w0, w1) -> elements 0, 1 and (w2, w3) -> elements 2, 3.
  float z[4][kGroups];
  for (int pair = 0; pair < 2; ++pair) {
    const std::uint32_t* a = pair == 0 ? c0 : c2;
    const std::uint32_t* b = pair == 0 ? c1 : c3;
    for (int lane = 0; lane < kGroups; ++lane) {
      const float radius = math::box_muller_radius(a[lane]);
      float sin_v = 0.0f, cos_v = 0.0f;
      math::sincos_turns(static_cast<std::int32_t>(b[lane] >> 8), sin_v, cos_v);
      z[2 * pair][lane] = radius * cos_v;
      z[2 * pair + 1][lane] = radius * sin_v;
    }
  }
  for (int lane = 0; lane < kGroups; ++lane) {
    for (int e = 0; e < 4; ++e) out[4 * lane + e] = z[e][lane];
  }
}

void counter_normal_range(float* out, std::uint64_t key, float std, std::uint64_t first, std::int64_t count) {
  alignas(64) float z[kCounterNormalBatch];
  std::uint64_t i = first;
  const std::uint64_t end = first + static_cast<std::uint64_t>(count);
  while (i < end) {
    counter_normal_batch(key, i / kCounterNormalBatch, z);
    const std::uint64_t offset = i % kCounterNormalBatch;
    const std::uint64_t n = std::min<std::uint64_t>(end - i, kCounterNormalBatch - offset);
    for (std::uint64_t j = 0; j < n; ++j) out[j] = std * z[offset + j];
    out += n;
    i += n;
  }
}

}  // namespace megatron::kernels::detail
