// What the GPUs of this process are, and the device-to-device copy bandwidth every memory-bound
// kernel benchmark is measured against. Needs the CUDA build; a machine without a GPU reports
// zero devices rather than failing.
#pragma once

#include <string>
#include <vector>

namespace megatron::kernels {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int sm_major = 0;
  int sm_minor = 0;
  int multiprocessors = 0;
  double memory_gib = 0.0;
};

// Visible devices; empty when there is no GPU or no driver.
std::vector<DeviceInfo> query_devices();

// Measured cudaMemcpyDeviceToDevice bandwidth on `device`, in GB/s (10^9 bytes/s), counting the
// bytes read plus the bytes written, best of `repeats` copies of `bytes` bytes.
double measure_copy_bandwidth_gbs(int device, std::size_t bytes, int repeats);

}  // namespace megatron::kernels
