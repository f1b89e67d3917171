// Device selection and generators (see device.h); the CUDA parts only in builds with the kernels.
#include "megatron/kernels/device.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cstdio>

#include "checks.h"
#include "megatron/core/check.h"

#if MEGATRON_CUDA_KERNELS
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace megatron::kernels {

bool built_with_cuda() { return MEGATRON_CUDA_KERNELS != 0; }

bool cuda_usable() {
#if MEGATRON_CUDA_KERNELS
  return at::cuda::is_available();
#else
  return false;
#endif
}

int cuda_device_count() {
#if MEGATRON_CUDA_KERNELS
  if (cuda_usable()) return static_cast<int>(c10::cuda::device_count());
#endif
  return 0;
}

at::Device select_device(int local_rank) {
#if MEGATRON_CUDA_KERNELS
  if (cuda_usable()) {
    const int count = static_cast<int>(c10::cuda::device_count());
    const auto index = static_cast<c10::DeviceIndex>(local_rank % count);
    c10::cuda::set_device(index);
    return {at::kCUDA, index};
  }
#endif
  (void)local_rank;
  return at::Device(at::kCPU);
}

at::Generator make_generator(const at::Device& device, std::uint64_t seed) {
  if (device.is_cpu()) return at::make_generator<at::CPUGeneratorImpl>(seed);
#if MEGATRON_CUDA_KERNELS
  if (device.is_cuda()) {
    at::Generator gen = at::make_generator<at::CUDAGeneratorImpl>(device.index());
    gen.set_current_seed(seed);
    return gen;
  }
#endif
  MEGATRON_FAIL("no random-number generator for device ", device);
}

std::string describe_device(const at::Device& device) {
#if MEGATRON_CUDA_KERNELS
  if (device.is_cuda()) {
    const cudaDeviceProp* prop = at::cuda::getDeviceProperties(device.index());
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%s (%s, %.1f GiB)", device.str().c_str(), prop->name,
                  static_cast<double>(prop->totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
    return buf;
  }
#endif
  return device.str();
}

std::int64_t device_memory_bytes(const at::Device& device) {
#if MEGATRON_CUDA_KERNELS
  if (device.is_cuda()) return static_cast<std::int64_t>(at::cuda::getDeviceProperties(device.index())->totalGlobalMem);
#endif
  (void)device;
  return 0;
}

std::int64_t peak_memory_bytes(const at::Device& device) {
#if MEGATRON_CUDA_KERNELS
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return stats.allocated_bytes[static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
  }
#endif
  (void)device;
  return 0;
}

MemoryStats memory_stats(const at::Device& device) {
  MemoryStats out;
#if MEGATRON_CUDA_KERNELS
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    const auto all = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    out.allocated = stats.allocated_bytes[all].current;
    out.max_allocated = stats.allocated_bytes[all].peak;
    out.reserved = stats.reserved_bytes[all].current;
    out.max_reserved = stats.reserved_bytes[all].peak;
    out.allocation_count = stats.allocation[all].current;
  }
#endif
  (void)device;
  return out;
}

void reset_peak_memory(const at::Device& device) {
#if MEGATRON_CUDA_KERNELS
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#endif
  (void)device;
}

}  // namespace megatron::kernels
