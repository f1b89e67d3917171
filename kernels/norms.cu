// LayerNorm / RMSNorm forward and backward kernels (see norms.h). Forward: one block per row, the
// row (after the residual add) cached in shared memory in the input type, mean then variance in
// two fp32 passes over that cache, so global memory is read and written once. Backward: a grid of
// `parts` blocks striding over rows; each row is read twice (the second read is L2-hot), dx written
// once, weight/bias gradients accumulated in fp32 per column in shared memory (each column owned by
// one thread, so no atomics), written as [parts, hidden] partials and summed by a second kernel.
#include <cuda_runtime.h>

#include <algorithm>

#include "megatron/kernels/cuda_check.h"
#include "megatron/kernels/norms.h"
#include "common.cuh"

namespace megatron::kernels {
namespace {

using detail::allow_dynamic_smem;
using detail::block_sum2;
using detail::current_device_attribute;
using detail::from_float;
using detail::load_vec;
using detail::store_vec;
using detail::to_float;
using detail::Vec;

constexpr int kStaticSmemBytes = 64 * sizeof(float);  // block_sum2 scratch

struct NormFwdParams {
  int64_t rows;
  int64_t hidden;
  const void* x;
  const void* residual;
  const void* weight;
  const void* bias;
  void* out;
  void* residual_out;
  float* mean;
  float* rstd;
  float eps;
};

struct NormBwdParams {
  int64_t rows;
  int64_t hidden;
  const void* grad_out;
  const void* input;
  const void* weight;
  const float* mean;
  const float* rstd;
  const void* grad_residual_out;
  void* grad_input;
  float* partial_weight;  // [gridDim.x, hidden]
  float* partial_bias;    // [gridDim.x, hidden] or null
};

template <typename T, int N, bool kRms>
__global__ void norm_fwd_kernel(NormFwdParams p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ float scratch[64];
  T* cache = reinterpret_cast<T*>(smem_raw);  // this row, [hidden]
  const int64_t row = blockIdx.x;
  const int64_t nvec = p.hidden / N;
  const T* x = static_cast<const T*>(p.x) + row * p.hidden;
  const T* residual = p.residual ? static_cast<const T*>(p.residual) + row * p.hidden : nullptr;
  T* residual_out = p.residual ? static_cast<T*>(p.residual_out) + row * p.hidden : nullptr;
  T* out = static_cast<T*>(p.out) + row * p.hidden;
  const T* weight = static_cast<const T*>(p.weight);
  const T* bias = static_cast<const T*>(p.bias);

  // Each thread reads back only the vectors it cached itself, so no barrier is needed between.
  float sum = 0.0f;
  for (int64_t v = threadIdx.x; v < nvec; v += blockDim.x) {
    Vec<T, N> xv = load_vec<T, N>(x, v);
    if (residual != nullptr) {
      const Vec<T, N> rv = load_vec<T, N>(residual, v);
#pragma unroll
      for (int e = 0; e < N; ++e) xv.v[e] = from_float<T>(to_float(xv.v[e]) + to_float(rv.v[e]));
      store_vec<T, N>(residual_out, v, xv);
    }
    store_vec<T, N>(cache, v, xv);
#pragma unroll
    for (int e = 0; e < N; ++e) sum += to_float(xv.v[e]);
  }
  const float inv_hidden = 1.0f / static_cast<float>(p.hidden);
  float mean = 0.0f;
  if constexpr (!kRms) mean = block_sum2(sum, 0.0f, scratch).x * inv_hidden;

  float sq = 0.0f;
  for (int64_t v = threadIdx.x; v < nvec; v += blockDim.x) {
    const Vec<T, N> cv = load_vec<T, N>(cache, v);
#pragma unroll
    for (int e = 0; e < N; ++e) {
      const float d = to_float(cv.v[e]) - mean;
      sq += d * d;
    }
  }
  const float rstd = rsqrtf(block_sum2(sq, 0.0f, scratch).x * inv_hidden + p.eps);

  for (int64_t v = threadIdx.x; v < nvec; v += blockDim.x) {
    const Vec<T, N> cv = load_vec<T, N>(cache, v);
    const Vec<T, N> wv = load_vec<T, N>(weight, v);
    Vec<T, N> ov;
    if (bias != nullptr) {
      const Vec<T, N> bv = load_vec<T, N>(bias, v);
#pragma unroll
      for (int e = 0; e < N; ++e) {
        ov.v[e] = from_float<T>((to_float(cv.v[e]) - mean) * rstd * to_float(wv.v[e]) + to_float(bv.v[e]));
      }
    } else {
#pragma unroll
      for (int e = 0; e < N; ++e) ov.v[e] = from_float<T>((to_float(cv.v[e]) - mean) * rstd * to_float(wv.v[e]));
    }
    store_vec<T, N>(out, v, ov);
  }
  if (threadIdx.x == 0) {
    if (p.mean != nullptr) p.mean[row] = mean;
    if (p.rstd != nullptr) p.rstd[row] = rstd;
  }
}

// Accumulator layout in shared memory: element e of vector v at e * nvec + v (conflict-free).
template <typename T, int N, bool kRms>
__global__ void norm_bwd_kernel(NormBwdParams p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ float scratch[64];
  const int64_t nvec = p.hidden / N;
  float* acc_w = reinterpret_cast<float*>(smem_raw);
  float* acc_b = acc_w + p.hidden;
  const bool has_bias = p.partial_bias != nullptr;
  for (int64_t v = threadIdx.x; v < nvec; v += blockDim.x) {
#pragma unroll
    for (int e = 0; e < N; ++e) {
      acc_w[e * nvec + v] = 0.0f;
      if (has_bias) acc_b[e * nvec + v] = 0.0f;
    }
  }
  const T* weight = static_cast<const T*>(p.weight);
  const float inv_hidden = 1.0f / static_cast<float>(p.hidden);

  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const T* dy = static_cast<const T*>(p.grad_out) + row * p.hidden;
    const T* x = static_cast<const T*>(p.input) + row * p.hidden;
    const T* grad_res = p.grad_residual_out ? static_cast<const T*>(p.grad_residual_out) + row * p.hidden : nullptr;
    T* dx = static_cast<T*>(p.grad_input) + row * p.hidden;
    const float mean = kRms ? 0.0f : p.mean[row];
    const float rstd = p.rstd[row];

    float sum_g = 0.0f, sum_gx = 0.0f;  // g = dy * w, x_hat = (x - mean) * rstd
    for (int64_t v = threadIdx.x; v < nvec; v += blockDim.x) {
      const Vec<T, N> dv = load_vec<T, N>(dy, v);
      const Vec<T, N> xv = load_vec<T, N>(x, v);
      const Vec<T, N> wv = load_vec<T, N>(weight, v);
#pragma unroll
      for (int e = 0; e < N; ++e) {
        const float g = to_float(dv.v[e]) * to_float(wv.v[e]);
        sum_g += g;
        sum_gx += g * (to_float(xv.v[e]) - mean) * rstd;
      }
    }
    const float2 sums = block_sum2(sum_g, sum_gx, scratch);
    const float mean_g = kRms ? 0.0f : sums.x * inv_hidden;
    const float mean_gx = sums.y * inv_hidden;

    for (int64_t v = threadIdx.x; v < nvec; v += blockDim.x) {
      const Vec<T, N> dv = load_vec<T, N>(dy, v);
      const Vec<T, N> xv = load_vec<T, N>(x, v);
      const Vec<T, N> wv = load_vec<T, N>(weight, v);
      Vec<T, N> rv;
      if (grad_res != nullptr) rv = load_vec<T, N>(grad_res, v);
      Vec<T, N> ov;
#pragma unroll
      for (int e = 0; e < N; ++e) {
        const float d = to_float(dv.v[e]);
        const float x_hat = (to_float(xv.v[e]) - mean) * rstd;
        float g = rstd * (d * to_float(wv.v[e]) - mean_g - x_hat * mean_gx);
        if (grad_res != nullptr) g += to_float(rv.v[e]);
        ov.v[e] = from_float<T>(g);
        acc_w[e * nvec + v] += d * x_hat;
        if (has_bias) acc_b[e * nvec + v] += d;
      }
      store_vec<T, N>(dx, v, ov);
    }
  }

  float* part_w = p.partial_weight + static_cast<int64_t>(blockIdx.x) * p.hidden;
  float* part_b = has_bias ? p.partial_bias + static_cast<int64_t>(blockIdx.x) * p.hidden : nullptr;
  for (int64_t v = threadIdx.x; v < nvec; v += blockDim.x) {
#pragma unroll
    for (int e = 0; e < N; ++e) {
      part_w[v * N + e] = acc_w[e * nvec + v];
      if (has_bias) part_b[v * N + e] = acc_b[e * nvec + v];
    }
  }
}

// out[j] = sum over parts of partials[part, j], in fp32, in a fixed order (deterministic).
template <typename T>
__global__ void reduce_partials_kernel(const float* partials, int64_t parts, int64_t hidden, T* out) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= hidden) return;
  float sum = 0.0f;
  for (int64_t part = 0; part < parts; ++part) sum += partials[part * hidden + j];
  out[j] = from_float<T>(sum);
}

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

int fwd_threads(int64_t nvec) { return static_cast<int>(std::clamp<int64_t>(round_up((nvec + 1) / 2, 32), 32, 512)); }
int bwd_threads(int64_t nvec) { return static_cast<int>(std::clamp<int64_t>(round_up(nvec, 32), 64, 512)); }

int64_t max_dynamic_smem() {
  return current_device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin) - kStaticSmemBytes;
}

int64_t elem_size(DType t) { return t == DType::kFloat32 ? 4 : 2; }

int64_t fwd_smem_bytes(DType t, int64_t hidden) { return round_up(hidden * elem_size(t), 16); }
int64_t bwd_smem_bytes(int64_t hidden, bool has_bias) { return (has_bias ? 2 : 1) * hidden * 4; }

// Blocks of the backward grid (= partial-sum rows); a function of the arguments and the device only.
int64_t bwd_parts(DType dtype, int64_t rows, int64_t hidden) {
  const int64_t vec = 16 / elem_size(dtype);
  const int threads = bwd_threads((hidden + vec - 1) / vec);
  const int64_t per_sm = std::clamp<int64_t>(2048 / threads, 1, 8);
  const int64_t sms = current_device_attribute(cudaDevAttrMultiProcessorCount);
  return std::max<int64_t>(1, std::min(rows, sms * per_sm));
}

template <typename T, int N>
void launch_fwd(NormKind kind, const NormFwdParams& p, cudaStream_t stream) {
  auto kernel = kind == NormKind::kRmsNorm ? norm_fwd_kernel<T, N, true> : norm_fwd_kernel<T, N, false>;
  const int64_t smem = round_up(p.hidden * static_cast<int64_t>(sizeof(T)), 16);
  allow_dynamic_smem(kernel, smem);
  kernel<<<static_cast<unsigned>(p.rows), fwd_threads(p.hidden / N), smem, stream>>>(p);
  CHECK_CUDA(cudaGetLastError());
}

template <typename T, int N>
void launch_bwd(NormKind kind, const NormBwdParams& p, int64_t parts, T* grad_weight, T* grad_bias,
                cudaStream_t stream) {
  auto kernel = kind == NormKind::kRmsNorm ? norm_bwd_kernel<T, N, true> : norm_bwd_kernel<T, N, false>;
  const int64_t smem = bwd_smem_bytes(p.hidden, p.partial_bias != nullptr);
  allow_dynamic_smem(kernel, smem);
  kernel<<<static_cast<unsigned>(parts), bwd_threads(p.hidden / N), smem, stream>>>(p);
  CHECK_CUDA(cudaGetLastError());
  const unsigned blocks = static_cast<unsigned>((p.hidden + 255) / 256);
  reduce_partials_kernel<T><<<blocks, 256, 0, stream>>>(p.partial_weight, parts, p.hidden, grad_weight);
  CHECK_CUDA(cudaGetLastError());
  if (grad_bias != nullptr) {
    reduce_partials_kernel<T><<<blocks, 256, 0, stream>>>(p.partial_bias, parts, p.hidden, grad_bias);
    CHECK_CUDA(cudaGetLastError());
  }
}

bool all_aligned16(std::initializer_list<const void*> ptrs) {
  return std::all_of(ptrs.begin(), ptrs.end(), [](const void* q) { return detail::aligned16(q); });
}

}  // namespace

bool norm_fwd_supported(NormKind, DType dtype, int64_t hidden) {
  return hidden > 0 && fwd_smem_bytes(dtype, hidden) <= max_dynamic_smem();
}

bool norm_bwd_supported(NormKind kind, DType, int64_t hidden, bool has_bias) {
  if (kind == NormKind::kRmsNorm && has_bias) return false;
  return hidden > 0 && bwd_smem_bytes(hidden, has_bias) <= max_dynamic_smem();
}

int64_t norm_bwd_workspace_floats(DType dtype, int64_t rows, int64_t hidden, bool has_bias) {
  return (has_bias ? 2 : 1) * bwd_parts(dtype, std::max<int64_t>(rows, 1), hidden) * hidden;
}

void norm_fwd(const NormFwdArgs& a, cudaStream_t stream) {
  MEGATRON_CHECK(a.rows >= 0 && a.rows <= INT32_MAX, "norm_fwd: rows = ", a.rows, " out of range");
  MEGATRON_CHECK(norm_fwd_supported(a.kind, a.dtype, a.hidden), "norm_fwd: hidden = ", a.hidden, " (",
                 dtype_name(a.dtype), ") not supported on this device; use the ATen reference");
  MEGATRON_CHECK(a.x && a.weight && a.out, "norm_fwd: x, weight and out must be set");
  MEGATRON_CHECK((a.residual == nullptr) == (a.residual_out == nullptr),
                 "norm_fwd: residual and residual_out must be given together");
  MEGATRON_CHECK(a.kind == NormKind::kLayerNorm || (a.bias == nullptr && a.mean == nullptr),
                 "norm_fwd: RMSNorm takes no bias and produces no mean");
  if (a.rows == 0) return;
  const NormFwdParams p{a.rows, a.hidden, a.x, a.residual, a.weight, a.bias, a.out, a.residual_out,
                        a.mean, a.rstd, a.eps};
  dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = detail::kVec16<T>;
    if (a.hidden % kVec == 0 && all_aligned16({a.x, a.residual, a.weight, a.bias, a.out, a.residual_out})) {
      launch_fwd<T, kVec>(a.kind, p, stream);
    } else {
      launch_fwd<T, 1>(a.kind, p, stream);
    }
  });
}

void norm_bwd(const NormBwdArgs& a, cudaStream_t stream) {
  const bool has_bias = a.grad_bias != nullptr;
  MEGATRON_CHECK(a.rows >= 0, "norm_bwd: rows = ", a.rows, " out of range");
  MEGATRON_CHECK(norm_bwd_supported(a.kind, a.dtype, a.hidden, has_bias), "norm_bwd: hidden = ", a.hidden, " (",
                 dtype_name(a.dtype), ") not supported on this device; use the ATen reference");
  MEGATRON_CHECK(a.grad_out && a.input && a.weight && a.rstd && a.grad_input && a.grad_weight,
                 "norm_bwd: grad_out, input, weight, rstd, grad_input and grad_weight must be set");
  MEGATRON_CHECK(a.kind == NormKind::kRmsNorm || a.mean != nullptr, "norm_bwd: LayerNorm needs mean");
  const int64_t parts = bwd_parts(a.dtype, std::max<int64_t>(a.rows, 1), a.hidden);
  const int64_t need = (has_bias ? 2 : 1) * parts * a.hidden;
  MEGATRON_CHECK(a.workspace != nullptr && a.workspace_floats >= need, "norm_bwd: workspace of ",
                 a.workspace_floats, " floats is smaller than the ", need, " needed (norm_bwd_workspace_floats)");
  if (a.rows == 0) {
    const auto bytes = static_cast<size_t>(a.hidden * elem_size(a.dtype));
    CHECK_CUDA(cudaMemsetAsync(a.grad_weight, 0, bytes, stream));
    if (has_bias) CHECK_CUDA(cudaMemsetAsync(a.grad_bias, 0, bytes, stream));
    return;
  }
  const NormBwdParams p{a.rows, a.hidden, a.grad_out, a.input, a.weight, a.mean, a.rstd, a.grad_residual_out,
                        a.grad_input, a.workspace, has_bias ? a.workspace + parts * a.hidden : nullptr};
  dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = detail::kVec16<T>;
    T* gw = static_cast<T*>(a.grad_weight);
    T* gb = static_cast<T*>(a.grad_bias);
    if (a.hidden % kVec == 0 && all_aligned16({a.grad_out, a.input, a.weight, a.grad_residual_out, a.grad_input})) {
      launch_bwd<T, kVec>(a.kind, p, parts, gw, gb, stream);
    } else {
      launch_bwd<T, 1>(a.kind, p, parts, gw, gb, stream);
    }
  });
}

}  // namespace megatron::kernels
