// Scaled upper-triangular masked softmax, forward and backward (see causal_softmax.h). One block
// per row (r, i): only the i + 1 unmasked elements are read, all sk are written. Rows that fit
// cache their fp32 values in shared memory so global memory is read once; longer rows re-read
// global memory (kCache = false). Vector width kVec needs sk % kVec == 0 and aligned pointers.
#include <cuda_runtime.h>

#include <climits>
#include <cmath>

#include "megatron/kernels/causal_softmax.h"
#include "megatron/kernels/cuda_check.h"
#include "common.cuh"

namespace megatron::kernels {
namespace {

using detail::block_reduce;
using detail::from_float;
using detail::load_vec;
using detail::MaxOp;
using detail::store_vec;
using detail::SumOp;
using detail::to_float;
using detail::Vec;

// Shared-memory cache layout: element e of chunk c at [e * chunks + c], so the threads of a warp
// (consecutive c) hit consecutive banks.
template <typename T, int kVec, bool kCache>
__global__ void causal_softmax_fwd(CausalSoftmaxFwdParams p) {
  extern __shared__ float cache[];
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int64_t n_valid = row % p.sq + 1;
  const T* x = static_cast<const T*>(p.x) + row * p.sk;
  T* y = static_cast<T*>(p.y) + row * p.sk;
  const int64_t chunks = p.sk / kVec;
  const int64_t valid_chunks = (n_valid + kVec - 1) / kVec;

  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < valid_chunks; c += blockDim.x) {
    const Vec<T, kVec> v = load_vec<T, kVec>(x + c * kVec);
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float val = c * kVec + e < n_valid ? to_float(v.v[e]) * p.scale : -INFINITY;
      if constexpr (kCache) cache[e * chunks + c] = val;
      m = fmaxf(m, val);
    }
  }
  m = block_reduce(m, MaxOp{}, scratch);

  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < valid_chunks; c += blockDim.x) {
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const int64_t j = c * kVec + e;
      if (j >= n_valid) continue;
      float val;
      if constexpr (kCache) val = cache[e * chunks + c];
      else val = to_float(x[j]) * p.scale;
      const float ex = expf(val - m);
      if constexpr (kCache) cache[e * chunks + c] = ex;
      sum += ex;
    }
  }
  sum = block_reduce(sum, SumOp{}, scratch);
  const float inv_sum = 1.0f / sum;

  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    Vec<T, kVec> out;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const int64_t j = c * kVec + e;
      float prob = 0.0f;
      if (j < n_valid) {
        if constexpr (kCache) prob = cache[e * chunks + c] * inv_sum;
        else prob = expf(to_float(x[j]) * p.scale - m) * inv_sum;
      }
      out.v[e] = from_float<T>(prob);
    }
    store_vec<T, kVec>(y + c * kVec, out);
  }
}

// Cache layout: y at [e * chunks + c], dy at [(kVec + e) * chunks + c].
template <typename T, int kVec, bool kCache>
__global__ void causal_softmax_bwd(CausalSoftmaxBwdParams p) {
  extern __shared__ float cache[];
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int64_t n_valid = row % p.sq + 1;
  const T* dy = static_cast<const T*>(p.dy) + row * p.sk;
  const T* y = static_cast<const T*>(p.y) + row * p.sk;
  T* dx = static_cast<T*>(p.dx) + row * p.sk;
  const int64_t chunks = p.sk / kVec;
  const int64_t valid_chunks = (n_valid + kVec - 1) / kVec;

  float dot = 0.0f;
  for (int64_t c = threadIdx.x; c < valid_chunks; c += blockDim.x) {
    const Vec<T, kVec> vy = load_vec<T, kVec>(y + c * kVec);
    const Vec<T, kVec> vdy = load_vec<T, kVec>(dy + c * kVec);
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      if (c * kVec + e >= n_valid) continue;
      const float fy = to_float(vy.v[e]);
      const float fdy = to_float(vdy.v[e]);
      if constexpr (kCache) {
        cache[e * chunks + c] = fy;
        cache[(kVec + e) * chunks + c] = fdy;
      }
      dot += fy * fdy;
    }
  }
  dot = block_reduce(dot, SumOp{}, scratch);

  // Each thread rewrites only elements it read itself above, so dx may alias dy.
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    Vec<T, kVec> out;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const int64_t j = c * kVec + e;
      float g = 0.0f;
      if (j < n_valid) {
        float fy, fdy;
        if constexpr (kCache) {
          fy = cache[e * chunks + c];
          fdy = cache[(kVec + e) * chunks + c];
        } else {
          fy = to_float(y[j]);
          fdy = to_float(dy[j]);
        }
        g = p.scale * fy * (fdy - dot);
      }
      out.v[e] = from_float<T>(g);
    }
    store_vec<T, kVec>(dx + c * kVec, out);
  }
}

int max_dynamic_smem() {
  // Leaves room for the static reduction scratch.
  return detail::current_device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin) - 1024;
}

// Picks the vector width and the cached/uncached variant, then launches kernel_for<kVec, kCache>.
// floats_per_element: shared-memory floats cached per row element (1 forward, 2 backward).
template <typename T, typename Params, typename KernelFor>
void launch_rows(const Params& p, bool vec_ok, int floats_per_element, cudaStream_t stream,
                 KernelFor kernel_for) {
  MEGATRON_CHECK(p.sq == p.sk, "causal softmax needs sq == sk, got sq=", p.sq, " sk=", p.sk);
  MEGATRON_CHECK(p.batch_heads > 0 && p.sk > 0, "causal softmax needs a non-empty input");
  const int64_t rows = p.batch_heads * p.sq;
  MEGATRON_CHECK(rows <= INT_MAX, "causal softmax: batch_heads * sq = ", rows, " exceeds the grid limit");
  constexpr int kWide = detail::kVec16<T>;
  const bool wide = vec_ok && p.sk % kWide == 0;
  const int64_t chunks = wide ? p.sk / kWide : p.sk;
  const dim3 grid(static_cast<unsigned>(rows));
  const dim3 block(detail::threads_for(chunks, 4, 512));
  const size_t smem = static_cast<size_t>(p.sk) * floats_per_element * sizeof(float);
  const bool cache = p.cache_row && smem <= static_cast<size_t>(max_dynamic_smem());
  auto go = [&](auto kernel, size_t bytes) {
    detail::allow_dynamic_smem(kernel, static_cast<int64_t>(bytes));
    kernel<<<grid, block, bytes, stream>>>(p);
    CHECK_CUDA(cudaGetLastError());
  };
  if (wide) {
    if (cache) go(kernel_for(std::integral_constant<int, kWide>{}, std::true_type{}), smem);
    else go(kernel_for(std::integral_constant<int, kWide>{}, std::false_type{}), 0);
  } else {
    if (cache) go(kernel_for(std::integral_constant<int, 1>{}, std::true_type{}), smem);
    else go(kernel_for(std::integral_constant<int, 1>{}, std::false_type{}), 0);
  }
}

}  // namespace

void launch_causal_softmax_fwd(const CausalSoftmaxFwdParams& params, cudaStream_t stream) {
  MEGATRON_CHECK(params.x != nullptr && params.y != nullptr, "causal softmax forward: null pointer");
  dispatch_dtype(params.dtype, [&](auto t) {
    using T = decltype(t);
    const bool vec_ok = detail::aligned16(params.x) && detail::aligned16(params.y);
    launch_rows<T>(params, vec_ok, 1, stream, [](auto vec, auto cache) {
      return &causal_softmax_fwd<T, decltype(vec)::value, decltype(cache)::value>;
    });
  });
}

void launch_causal_softmax_bwd(const CausalSoftmaxBwdParams& params, cudaStream_t stream) {
  MEGATRON_CHECK(params.dy != nullptr && params.y != nullptr && params.dx != nullptr,
                 "causal softmax backward: null pointer");
  dispatch_dtype(params.dtype, [&](auto t) {
    using T = decltype(t);
    const bool vec_ok = detail::aligned16(params.dy) && detail::aligned16(params.y) && detail::aligned16(params.dx);
    launch_rows<T>(params, vec_ok, 2, stream, [](auto vec, auto cache) {
      return &causal_softmax_bwd<T, decltype(vec)::value, decltype(cache)::value>;
    });
  });
}

}  // namespace megatron::kernels
