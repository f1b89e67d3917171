// Cross entropy forward (per-row max, sum of exponentials, target logit, optional loss) and
// backward (softmax minus one-hot, recomputed from the saved max and sum) over one vocabulary
// shard; see cross_entropy.h. One block per row; the forward reads each logit once with an online
// max/sum, the backward reads each logit once and writes each gradient once. Vector width kVec
// needs vocab % kVec == 0, logits_stride % kVec == 0 and 16-byte aligned pointers.
#include <cuda_runtime.h>

#include <climits>
#include <cmath>

#include "megatron/kernels/cross_entropy.h"
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

template <typename T, int kVec>
__global__ void cross_entropy_fwd(CrossEntropyFwdParams p) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const T* x = static_cast<const T*>(p.logits) + row * p.logits_stride;
  const int64_t chunks = p.vocab / kVec;

  // Online max/sum: sum is relative to the running max m; -inf max means "nothing seen yet".
  float m = -INFINITY;
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    const Vec<T, kVec> v = load_vec<T, kVec>(x + c * kVec);
    float vals[kVec];
    float chunk_max = -INFINITY;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      vals[e] = to_float(v.v[e]);
      chunk_max = fmaxf(chunk_max, vals[e]);
    }
    if (chunk_max > m) {
      sum *= expf(m - chunk_max);
      m = chunk_max;
    }
    if (m != -INFINITY) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) sum += expf(vals[e] - m);
    }
  }
  const float row_max = block_reduce(m, MaxOp{}, scratch);
  const float mine = m == -INFINITY ? 0.0f : sum * expf(m - row_max);
  const float row_sum = block_reduce(mine, SumOp{}, scratch);

  if (threadIdx.x == 0) {
    const int64_t target = p.target[row];
    const int64_t local = target - p.vocab_start;
    const bool ignored = target == p.ignore_index;
    const bool owned = !ignored && local >= 0 && local < p.vocab;
    const float target_logit = owned ? to_float(x[local]) : 0.0f;
    p.max[row] = row_max;
    p.sum_exp[row] = row_sum;
    p.target_logit[row] = target_logit;
    if (p.loss != nullptr) p.loss[row] = ignored ? 0.0f : logf(row_sum) + row_max - target_logit;
  }
}

template <typename T, int kVec>
__global__ void cross_entropy_bwd(CrossEntropyBwdParams p) {
  const int64_t row = blockIdx.x;
  const T* x = static_cast<const T*>(p.logits) + row * p.logits_stride;
  T* grad = static_cast<T*>(p.grad) + row * p.vocab;
  const int64_t chunks = p.vocab / kVec;
  const int64_t target = p.target[row];
  if (target == p.ignore_index) {
    Vec<T, kVec> zero;
#pragma unroll
    for (int e = 0; e < kVec; ++e) zero.v[e] = from_float<T>(0.0f);
    for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) store_vec<T, kVec>(grad + c * kVec, zero);
    return;
  }
  const int64_t local = target - p.vocab_start;  // may lie outside [0, vocab): no one-hot here
  const float row_max = p.max[row];
  const float inv_sum = 1.0f / p.sum_exp[row];
  const float g = p.grad_loss[row * p.grad_loss_stride];
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    const Vec<T, kVec> v = load_vec<T, kVec>(x + c * kVec);
    Vec<T, kVec> out;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float prob = expf(to_float(v.v[e]) - row_max) * inv_sum;
      const float onehot = c * kVec + e == local ? 1.0f : 0.0f;
      out.v[e] = from_float<T>((prob - onehot) * g);
    }
    store_vec<T, kVec>(grad + c * kVec, out);
  }
}

template <typename Params>
void check_common(const Params& p, const char* what) {
  MEGATRON_CHECK(p.logits != nullptr && p.target != nullptr, what, ": null pointer");
  MEGATRON_CHECK(p.rows > 0 && p.vocab > 0, what, ": empty logits [", p.rows, ", ", p.vocab, "]");
  MEGATRON_CHECK(p.rows <= INT_MAX, what, ": ", p.rows, " rows exceed the grid limit");
  MEGATRON_CHECK(p.logits_stride >= p.vocab, what, ": logits row stride ", p.logits_stride,
                 " is smaller than the shard width ", p.vocab);
}

// Launches kernel_for(vec) with vec = 16 / sizeof(T) when the shapes allow it, else 1.
template <typename T, typename Params, typename KernelFor>
void launch_rows(const Params& p, bool ptrs_aligned, cudaStream_t stream, KernelFor kernel_for) {
  constexpr int kWide = detail::kVec16<T>;
  const bool wide = ptrs_aligned && p.vocab % kWide == 0 && p.logits_stride % kWide == 0;
  const int64_t chunks = wide ? p.vocab / kWide : p.vocab;
  const dim3 grid(static_cast<unsigned>(p.rows));
  const dim3 block(detail::threads_for(chunks, 8, 512));
  if (wide) kernel_for(std::integral_constant<int, kWide>{})<<<grid, block, 0, stream>>>(p);
  else kernel_for(std::integral_constant<int, 1>{})<<<grid, block, 0, stream>>>(p);
  CHECK_CUDA(cudaGetLastError());
}

}  // namespace

void launch_cross_entropy_fwd(const CrossEntropyFwdParams& p, cudaStream_t stream) {
  check_common(p, "cross entropy forward");
  MEGATRON_CHECK(p.max != nullptr && p.sum_exp != nullptr && p.target_logit != nullptr,
                 "cross entropy forward: null output pointer");
  dispatch_dtype(p.dtype, [&](auto t) {
    using T = decltype(t);
    launch_rows<T>(p, detail::aligned16(p.logits), stream,
                   [](auto vec) { return &cross_entropy_fwd<T, decltype(vec)::value>; });
  });
}

void launch_cross_entropy_bwd(const CrossEntropyBwdParams& p, cudaStream_t stream) {
  check_common(p, "cross entropy backward");
  MEGATRON_CHECK(p.max != nullptr && p.sum_exp != nullptr && p.grad_loss != nullptr && p.grad != nullptr,
                 "cross entropy backward: null pointer");
  dispatch_dtype(p.dtype, [&](auto t) {
    using T = decltype(t);
    launch_rows<T>(p, detail::aligned16(p.logits) && detail::aligned16(p.grad), stream,
                   [](auto vec) { return &cross_entropy_bwd<T, decltype(vec)::value>; });
  });
}

}  // namespace megatron::kernels
