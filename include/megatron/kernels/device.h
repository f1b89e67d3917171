// The device a training process runs on, and random-number generators on it: the GPU given by the
// local rank when CUDA is usable (a build with the CUDA kernels, a driver and a visible GPU), the
// CPU otherwise. The model, optimizer and trainer take the device from here and are otherwise
// device-agnostic.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

namespace megatron::kernels {

// Whether this build has the CUDA kernels and LibTorch's CUDA half (a GPU may still be absent).
bool built_with_cuda();
// Whether this process can run on a GPU.
bool cuda_usable();
// The GPUs this process sees (0 without CUDA).
int cuda_device_count();
// cuda:(local_rank % visible GPUs) when cuda_usable(), else CPU. Makes the GPU current.
at::Device select_device(int local_rank);
// A generator on `device` (CPU or CUDA) seeded with `seed`.
at::Generator make_generator(const at::Device& device, std::uint64_t seed);
// "cuda:0 (NVIDIA H100 80GB HBM3, 79.1 GiB)" or "cpu".
std::string describe_device(const at::Device& device);
// A CUDA device's total memory in bytes (0 on the CPU: the host's memory is not a device's).
std::int64_t device_memory_bytes(const at::Device& device);
// Peak bytes allocated on a CUDA device since the last reset (0 on CPU).
std::int64_t peak_memory_bytes(const at::Device& device);
void reset_peak_memory(const at::Device& device);

// The caching allocator's counters of a CUDA device, in bytes (all 0 on CPU): what Megatron's
// report_memory prints.
struct MemoryStats {
  std::int64_t allocated = 0, max_allocated = 0, reserved = 0, max_reserved = 0;
  std::int64_t allocation_count = 0;  // live blocks
};
MemoryStats memory_stats(const at::Device& device);

}  // namespace megatron::kernels
