// Device query and the copy-bandwidth reference (see device_info.h).
#include <cuda_runtime.h>

#include <algorithm>

#include "megatron/kernels/cuda_check.h"
#include "megatron/kernels/device_info.h"

namespace megatron::kernels {

std::vector<DeviceInfo> query_devices() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device / no driver" status
    return {};
  }
  std::vector<DeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    CHECK_CUDA(cudaGetDeviceProperties(&prop, i));
    devices.push_back({i, prop.name, prop.major, prop.minor, prop.multiProcessorCount,
                       static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0)});
  }
  return devices;
}

double measure_copy_bandwidth_gbs(int device, std::size_t bytes, int repeats) {
  CHECK_CUDA(cudaSetDevice(device));
  void* src = nullptr;
  void* dst = nullptr;
  CHECK_CUDA(cudaMalloc(&src, bytes));
  CHECK_CUDA(cudaMalloc(&dst, bytes));
  CHECK_CUDA(cudaMemset(src, 1, bytes));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  CHECK_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));  // warm-up
  float best_ms = 0.0f;
  for (int r = 0; r < repeats; ++r) {
    CHECK_CUDA(cudaEventRecord(start));
    CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice));
    CHECK_CUDA(cudaEventRecord(stop));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    best_ms = r == 0 ? ms : std::min(best_ms, ms);
  }
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  CHECK_CUDA(cudaFree(src));
  CHECK_CUDA(cudaFree(dst));
  return 2.0 * static_cast<double>(bytes) / (static_cast<double>(best_ms) * 1e-3) / 1e9;
}

}  // namespace megatron::kernels
