// The ATen entry of the counter-based normal draws (init_ops.h): CPU tensors are filled by
// counter_normal_cpu.cpp over at::parallel_for, CUDA tensors by counter_normal.cu.
#include "megatron/kernels/aten/init_ops.h"

#include <ATen/Parallel.h>

#include <algorithm>

#include "checks.h"
#include "counter_normal_cpu.h"
#include "megatron/core/check.h"
#if MEGATRON_CUDA_KERNELS
#include "megatron/kernels/counter_normal.h"
#endif

namespace megatron::kernels {
namespace {

void fill_cpu(float* out, std::uint64_t key, float std, const ShardRuns& runs) {
  // Split by elements (a replicated tensor is one long run), each piece run by run.
  constexpr std::int64_t kGrain = 1 << 15;
  at::parallel_for(0, runs.numel(), kGrain, [&](std::int64_t begin, std::int64_t end) {
    std::int64_t j = begin;
    while (j < end) {
      const std::int64_t in_run = j % runs.run_length;
      const std::int64_t count = std::min(end - j, runs.run_length - in_run);
      detail::counter_normal_range(out + j, key, std, static_cast<std::uint64_t>(runs.full_index(j)), count);
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

float counter_normal_value(std::uint64_t key, std::uint64_t i) {
  float z[detail::kCounterNormalBatch];
  detail::counter_normal_batch(key, i / detail::kCounterNormalBatch, z);
  return z[i % detail::kCounterNormalBatch];
}

}  // namespace megatron::kernels
