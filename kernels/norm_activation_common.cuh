// Device helpers shared by norms.cu and activations.cu: fp32 conversion of the kernel element types,
// an aligned vector of N elements for 16-byte loads, and a block-wide fp32 sum. Internal header.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace megatron::kernels::detail {

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(v);
  } else {
    return __float2half_rn(v);
  }
}

// N consecutive elements loaded or stored with one instruction (N * sizeof(T) <= 16).
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

template <typename T, int N>
__device__ __forceinline__ Vec<T, N> load_vec(const T* base, int64_t vec_index) {
  return reinterpret_cast<const Vec<T, N>*>(base)[vec_index];
}

template <typename T, int N>
__device__ __forceinline__ void store_vec(T* base, int64_t vec_index, const Vec<T, N>& value) {
  reinterpret_cast<Vec<T, N>*>(base)[vec_index] = value;
}

// Elements per 16-byte vector.
template <typename T>
constexpr int kVec16 = static_cast<int>(16 / sizeof(T));

inline bool aligned16(const void* p) { return p == nullptr || reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sum of (a, b) over the block; every thread gets the result. blockDim.x must be a multiple of 32;
// scratch holds 64 floats. Ends with a barrier, so scratch may be reused right away.
__device__ __forceinline__ float2 block_sum2(float a, float b, float* scratch) {
  a = warp_sum(a);
  b = warp_sum(b);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
  if (lane == 0) {
    scratch[warp] = a;
    scratch[32 + warp] = b;
  }
  __syncthreads();
  float sa = 0.0f, sb = 0.0f;
  for (int w = 0; w < warps; ++w) {
    sa += scratch[w];
    sb += scratch[32 + w];
  }
  __syncthreads();
  return make_float2(sa, sb);
}

}  // namespace megatron::kernels::detail
