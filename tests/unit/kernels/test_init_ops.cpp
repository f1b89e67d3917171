// The counter-based draw on a GPU (counter_normal.cu) against the CPU path (counter_normal_cpu.cpp):
// both run the arithmetic of counter_normal_math.h without fused multiply-adds, so the GPU must
// draw the CPU's bits. Covers whole tensors past one grid's worth of
// blocks, shards with strided runs, and an offset base. Skipped without a GPU (gpu_check.sh
// counts a skip as a failure there). Also here: a CUDA build's ATen CUDA kernels are registered
// in this binary (without a GPU too; tests/check_torch_cuda_linkage.sh checks every binary).
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "megatron/kernels/aten/init_ops.h"
#include "megatron/kernels/device.h"

namespace megatron::kernels {
namespace {

// max |gpu - cpu| / max(1, |cpu|) over the elements.
double worst_relative_difference(const at::Tensor& gpu, const at::Tensor& cpu) {
  const at::Tensor g = gpu.cpu().to(at::kDouble), c = cpu.to(at::kDouble);
  return ((g - c).abs() / c.abs().clamp_min(1.0)).max().item<double>();
}

// A CUDA build must load LibTorch's CUDA half, which registers ATen's CUDA kernels: linked
// --as-needed it is dropped (nothing references its symbols) and every CUDA tensor fails on a GPU.
// Checkable without a GPU: the dispatcher knows a CUDA kernel for aten::empty.
TEST(CudaBuild, AtenCudaKernelsAreRegistered) {
  if (!built_with_cuda()) GTEST_SKIP() << "a CPU build";
  const auto empty = c10::Dispatcher::singleton().findSchema({"aten::empty", "memory_format"});
  ASSERT_TRUE(empty.has_value());
  EXPECT_TRUE(empty->hasKernelForDispatchKey(c10::DispatchKey::CUDA))
      << "libtorch_cuda.so is not loaded: ATen has no CUDA kernels in this process";
}

TEST(CounterNormalCuda, TheGpuDrawsTheCpuStream) {
  if (!cuda_usable()) GTEST_SKIP() << "no GPU";
  struct Case {
    std::string what;
    std::uint64_t key;
    ShardRuns runs;
  };
  const std::int64_t big = (std::int64_t{1} << 28) + 4099;  // more elements than 2^20 blocks x 256 threads
  const std::vector<Case> cases = {
      {"whole tensor, 2^28 + 4099 elements", 0x9e3779b97f4a7c15ull, {1, big, 1, 0, 0, 0}},
      {"column shard: 96 rows of 40 from a 96 x 320 tensor, rank 3 of 8", 7, {96, 40, 1, 320, 0, 120}},
      {"SwiGLU fc1 shard: [gate; up] halves, 2 runs per block", 11, {2, 6 * 512, 2, 0, 48 * 512, 6 * 512}},
      {"row shard with a base past 2^32", ~std::uint64_t{0}, {1000, 33, 1, 99, 0, (std::int64_t{1} << 33) + 5}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    at::Tensor cpu = at::empty({c.runs.numel()});
    fill_counter_normal(cpu, c.key, 0.02, c.runs);
    at::Tensor gpu = at::full({c.runs.numel()}, std::numeric_limits<float>::quiet_NaN(),
                              at::TensorOptions().device(at::kCUDA));  // poisoned: every element must be written
    fill_counter_normal(gpu, c.key, 0.02, c.runs);
    EXPECT_FALSE(gpu.isnan().any().item<bool>()) << "elements left unwritten";
    const at::Tensor differs = gpu.cpu().ne(cpu);
    EXPECT_EQ(differs.sum().item<std::int64_t>(), 0)
        << "GPU and CPU draws of the same elements differ; the first at shard element "
        << (differs.any().item<bool>() ? differs.nonzero()[0][0].item<std::int64_t>() : -1)
        << " (largest difference " << worst_relative_difference(gpu, cpu) << ")";
    // The first elements also against the CPU's element-by-element entry.
    for (std::int64_t j : {std::int64_t{0}, std::int64_t{1}, std::int64_t{2}, std::int64_t{3}, c.runs.numel() - 1}) {
      const float expected = 0.02f * counter_normal_value(c.key, static_cast<std::uint64_t>(c.runs.full_index(j)));
      EXPECT_EQ(gpu[j].item<float>(), expected) << "shard element " << j;
    }
  }
}

}  // namespace
}  // namespace megatron::kernels
