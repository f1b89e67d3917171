// Rotary position embedding forward and backward (see rope.h). One block per token (s, b): the
// block first turns the token's rot_dim angles into cos/sin in shared memory (sincosf, full
// range), then each thread rotates whole pairs (k, partner) of one head, reading and writing
// every element once; channels past rot_dim are copied.
#include <cuda_runtime.h>

#include <climits>

#include "megatron/kernels/cuda_check.h"
#include "megatron/kernels/rope.h"
#include "common.cuh"

namespace megatron::kernels {
namespace {

using detail::from_float;
using detail::to_float;

// Pair m of the rotated channels is (k, partner) = (m, m + rot_dim/2) half-split or
// (2m, 2m + 1) interleaved; rotate_half gives -t[partner] at k and +t[k] at partner.
//   forward:  out[k] = t[k] c[k] - t[p] s[k],   out[p] = t[p] c[p] + t[k] s[p]
//   backward: dt[k] = dy[k] c[k] + dy[p] s[p],  dt[p] = dy[p] c[p] - dy[k] s[k]
template <typename T, bool kInterleaved, bool kBackward>
__device__ __forceinline__ void rope_token(const RopeParams& p) {
  extern __shared__ float table[];  // cos at [0, rot_dim), sin at [rot_dim, 2 rot_dim)
  const int64_t token = blockIdx.x;
  const int64_t si = token / p.b;
  const int64_t bi = token % p.b;
  const float* f = p.freqs + si * p.freqs_stride;
  for (int64_t k = threadIdx.x; k < p.rot_dim; k += blockDim.x) {
    float sn, cs;
    sincosf(f[k], &sn, &cs);
    table[k] = cs;
    table[p.rot_dim + k] = sn;
  }
  __syncthreads();
  const float* cos_t = table;
  const float* sin_t = table + p.rot_dim;
  const int64_t half = p.rot_dim / 2;
  const int64_t per_head = half + (p.hn - p.rot_dim);
  const T* in = static_cast<const T*>(p.in) + si * p.in_stride_s + bi * p.in_stride_b;
  T* out = static_cast<T*>(p.out) + token * p.heads * p.hn;
  for (int64_t idx = threadIdx.x; idx < p.heads * per_head; idx += blockDim.x) {
    const int64_t h = idx / per_head;
    const int64_t r = idx % per_head;
    const T* src = in + h * p.in_stride_h;
    T* dst = out + h * p.hn;
    if (r < half) {
      const int64_t k = kInterleaved ? 2 * r : r;
      const int64_t q = kInterleaved ? 2 * r + 1 : r + half;
      const float a = to_float(src[k]);
      const float c = to_float(src[q]);
      float out_k, out_q;
      if constexpr (kBackward) {
        out_k = a * cos_t[k] + c * sin_t[q];
        out_q = c * cos_t[q] - a * sin_t[k];
      } else {
        out_k = a * cos_t[k] - c * sin_t[k];
        out_q = c * cos_t[q] + a * sin_t[q];
      }
      dst[k] = from_float<T>(out_k);
      dst[q] = from_float<T>(out_q);
    } else {
      const int64_t ch = p.rot_dim + (r - half);
      dst[ch] = src[ch];
    }
  }
}

template <typename T, bool kInterleaved>
__global__ void rope_fwd(RopeParams p) {
  rope_token<T, kInterleaved, false>(p);
}

template <typename T, bool kInterleaved>
__global__ void rope_bwd(RopeParams p) {
  rope_token<T, kInterleaved, true>(p);
}

}  // namespace

void launch_rope(const RopeParams& p, cudaStream_t stream) {
  MEGATRON_CHECK(p.in != nullptr && p.out != nullptr && p.freqs != nullptr, "rope: null pointer");
  MEGATRON_CHECK(p.s > 0 && p.b > 0 && p.heads > 0 && p.hn > 0, "rope: empty input [", p.s, ", ", p.b,
                 ", ", p.heads, ", ", p.hn, "]");
  MEGATRON_CHECK(p.rot_dim > 0 && p.rot_dim <= p.hn && p.rot_dim % 2 == 0, "rope: rot_dim ", p.rot_dim,
                 " must be even and in (0, hn=", p.hn, "]");
  MEGATRON_CHECK(p.s * p.b <= INT_MAX, "rope: s * b = ", p.s * p.b, " exceeds the grid limit");
  const int64_t items = p.heads * (p.hn - p.rot_dim / 2);
  const dim3 grid(static_cast<unsigned>(p.s * p.b));
  const dim3 block(detail::threads_for(items, 4, 256));
  const size_t smem = static_cast<size_t>(2 * p.rot_dim) * sizeof(float);
  MEGATRON_CHECK(smem <= 48 * 1024, "rope: rot_dim ", p.rot_dim, " too large");
  dispatch_dtype(p.dtype, [&](auto t) {
    using T = decltype(t);
    auto kernel = p.backward ? (p.interleaved ? &rope_bwd<T, true> : &rope_bwd<T, false>)
                             : (p.interleaved ? &rope_fwd<T, true> : &rope_fwd<T, false>);
    kernel<<<grid, block, smem, stream>>>(p);
    CHECK_CUDA(cudaGetLastError());
  });
}

}  // namespace megatron::kernels
