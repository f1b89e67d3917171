// The ATen entry of the counter-based normal draws (init_ops.h). The CPU path computes each Philox
// block of four words once and writes the lanes of it the shard holds; the CUDA path launches
// counter_normal.cu. Scalar libm calls on the CPU (76 M values/s per thread here, bench_init): every
// element goes through the same instructions wherever it falls in a run, so shards drawn in any
// split are bit-identical to the single process's draw (a vectorised body with a scalar tail
// would not guarantee it).
#include "megatron/kernels/aten/init_ops.h"

#include <ATen/Parallel.h>
#include <ATen/core/PhiloxRNGEngine.h>

#include <array>
#include <cmath>

#include "checks.h"
#include "megatron/core/check.h"
#if MEGATRON_CUDA_KERNELS
#include "megatron/kernels/counter_normal.h"
#endif

namespace megatron::kernels {
namespace {

// The four values of Philox block `group` (elements 4 group .. 4 group + 3), std 1.
std::array<float, 4> block_values(std::uint64_t key, std::uint64_t group) {
  at::philox_engine engine(key, /*subsequence=*/0, /*offset=*/group);
  std::array<std::uint32_t, 4> w{};
  for (auto& word : w) word = engine();
  std::array<float, 4> z{};
  for (int pair = 0; pair < 2; ++pair) {
    const float u = static_cast<float>((w[2 * pair] >> 8) + 1u) * 0x1p-24f;
    const float v = static_cast<float>(w[2 * pair + 1] >> 8) * 0x1p-24f;
    const float r = std::sqrt(-2.0f * std::log(u));
    float sin = 0.0f, cos = 0.0f;
    ::sincosf(6.28318530717958647692f * v, &sin, &cos);  // glibc's, as CUDA's sincosf: both in one call
    z[2 * pair] = r * cos;
    z[2 * pair + 1] = r * sin;
  }
  return z;
}

// Writes full-tensor elements [first, first + count) of the stream to out.
void fill_range(float* out, std::uint64_t key, float std, std::uint64_t first, std::int64_t count) {
  std::uint64_t i = first;
  const std::uint64_t end = first + static_cast<std::uint64_t>(count);
  while (i < end) {
    const std::array<float, 4> z = block_values(key, i >> 2);
    do {
      *out++ = std * z[i & 3];
      ++i;
    } while (i < end && (i & 3) != 0);
  }
}

void fill_cpu(float* out, std::uint64_t key, float std, const ShardRuns& runs) {
  // Split by elements (a replicated tensor is one long run), each piece run by run.
  constexpr std::int64_t kGrain = 1 << 15;
  at::parallel_for(0, runs.numel(), kGrain, [&](std::int64_t begin, std::int64_t end) {
    std::int64_t j = begin;
    while (j < end) {
      const std::int64_t in_run = j % runs.run_length;
      const std::int64_t count = std::min(end - j, runs.run_length - in_run);
      fill_range(out + j, key, std, static_cast<std::uint64_t>(runs.full_index(j)), count);
      j += count;
    }
  });
}

}  // namespace

void fill_counter_normal(at::Tensor& out, std::uint64_t key, double std, const ShardRuns& runs) {
  MEGATRON_CHECK(out.scalar_type() == at::kFloat && out.is_contiguous() && out.numel() == runs.numel(),
                 "fill_counter_normal: need a contiguous fp32 tensor of ", runs.numel(), " elements, got ",
                 out.scalar_type(), " ", out.sizes());
  MEGATRON_CHECK(runs.runs >= 0 && runs.run_length >= 0 && runs.runs_per_block > 0,
                 "fill_counter_normal: invalid shard runs");
  if (runs.numel() == 0) return;
  if (out.is_cuda()) {
#if MEGATRON_CUDA_KERNELS
    const c10::cuda::CUDAGuard guard(out.device());
    CounterNormalParams p;
    p.out = out.data_ptr<float>();
    p.runs = runs;
    p.key = key;
    p.std = static_cast<float>(std);
    launch_counter_normal(p, at::cuda::getCurrentCUDAStream().stream());
    return;
#else
    MEGATRON_FAIL("fill_counter_normal: a CUDA tensor in a build without the CUDA kernels");
#endif
  }
  MEGATRON_CHECK(out.is_cpu(), "fill_counter_normal: unsupported device ", out.device());
  fill_cpu(out.data_ptr<float>(), key, static_cast<float>(std), runs);
}

float counter_normal_value(std::uint64_t key, std::uint64_t i) { return block_values(key, i >> 2)[i & 3]; }

}  // namespace megatron::kernels
