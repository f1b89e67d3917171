// CUDA-event timing shared by the GPU kernel benchmarks: runs fn on the current stream after a
// warm-up and returns the best and the median time of the timed runs, in milliseconds.
#pragma once

#include <ATen/cuda/CUDAContext.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "megatron/kernels/cuda_check.h"

namespace megatron::bench {

struct GpuTiming {
  double best_ms = 0.0;
  double median_ms = 0.0;
};

inline GpuTiming time_on_current_stream(const std::function<void()>& fn, int warmup, int repeats) {
  for (int i = 0; i < warmup; ++i) fn();
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  std::vector<float> times;
  for (int r = 0; r < repeats; ++r) {
    CHECK_CUDA(cudaEventRecord(start, stream));
    fn();
    CHECK_CUDA(cudaEventRecord(stop, stream));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  std::sort(times.begin(), times.end());
  return {times.front(), times[times.size() / 2]};
}

}  // namespace megatron::bench
