// Device and launch helpers shared by every kernel file: fp32 conversion of the kernel element
// types, an aligned vector of N elements for 16-byte accesses, block-wide fp32 reductions, and the
// host-side device-attribute and dynamic-shared-memory helpers. Internal header.
// Invariants: the block reductions need blockDim.x a multiple of 32 (at most 1024) and must be
// called by every thread of the block (they synchronise).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "megatron/kernels/cuda_check.h"

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

// The vector at p, which must be aligned to sizeof(Vec<T, N>).
template <typename T, int N>
__device__ __forceinline__ Vec<T, N> load_vec(const T* p) {
  return *reinterpret_cast<const Vec<T, N>*>(p);
}

template <typename T, int N>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, N>& value) {
  *reinterpret_cast<Vec<T, N>*>(p) = value;
}

// Vector number vec_index of the array at base (element vec_index * N).
template <typename T, int N>
__device__ __forceinline__ Vec<T, N> load_vec(const T* base, int64_t vec_index) {
  return load_vec<T, N>(base + vec_index * N);
}

template <typename T, int N>
__device__ __forceinline__ void store_vec(T* base, int64_t vec_index, const Vec<T, N>& value) {
  store_vec<T, N>(base + vec_index * N, value);
}

// Elements per 16-byte vector.
template <typename T>
constexpr int kVec16 = static_cast<int>(16 / sizeof(T));

// True for null (an absent optional array never blocks the vector path).
__host__ __device__ inline bool aligned(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}
inline bool aligned16(const void* p) { return aligned(p, 16); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sum of (a, b) over the block; every thread gets the result. scratch holds 64 floats. Ends with a
// barrier, so scratch may be reused right away.
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

struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

// Reduces v over the block; every thread gets the result. scratch: 32 floats of shared memory,
// reusable by the next call (the leading barrier keeps a previous call's readers safe).
template <typename Op>
__device__ __forceinline__ float block_reduce(float v, Op op, float* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = scratch[0];
  for (int w = 1; w < warps; ++w) r = op(r, scratch[w]);
  return r;
}

// Threads for a row of `chunks` work items: a power of two in [32, max_threads], about
// `per_thread` items each.
inline int threads_for(long long chunks, int per_thread, int max_threads) {
  int t = 32;
  while (t < max_threads && static_cast<long long>(t) * per_thread < chunks) t *= 2;
  return t;
}

// An attribute of the current device.
inline int current_device_attribute(cudaDeviceAttr attr) {
  int device = 0;
  CHECK_CUDA(cudaGetDevice(&device));
  int value = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&value, attr, device));
  return value;
}

constexpr int64_t kDefaultDynamicSmemBytes = 48 * 1024;

// Opts `kernel` into `bytes` of dynamic shared memory on the current device when past the default.
template <typename Kernel>
void allow_dynamic_smem(Kernel kernel, int64_t bytes) {
  if (bytes > kDefaultDynamicSmemBytes) {
    CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  }
}

}  // namespace megatron::kernels::detail
