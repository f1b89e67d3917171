// Device helpers shared by the softmax-family kernels (causal_softmax.cu, cross_entropy.cu):
// element conversion to and from fp32, aligned vector loads, and a block-wide fp32 reduction.
// Invariants: blockDim.x is a multiple of 32 and at most 1024; every thread of the block calls
// block_reduce (it synchronises).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace megatron::kernels::softmax_detail {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(x);
  } else {
    return __float2half_rn(x);
  }
}

// kN consecutive elements moved as one aligned access (16 bytes when kN * sizeof(T) == 16).
template <typename T, int kN>
struct alignas(sizeof(T) * kN) Vec {
  T v[kN];
};

template <typename T, int kN>
__device__ __forceinline__ Vec<T, kN> load_vec(const T* p) {
  return *reinterpret_cast<const Vec<T, kN>*>(p);
}

template <typename T, int kN>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, kN>& v) {
  *reinterpret_cast<Vec<T, kN>*>(p) = v;
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

}  // namespace megatron::kernels::softmax_detail
