// Bias + GeLU (tanh) and SwiGLU kernels (see activations.h): grid-stride elementwise loops, each
// input element read once and each output written once, 16-byte vectors when the feature count
// and every pointer allow, otherwise a scalar variant of the same kernel. fp32 math throughout.
#include <cuda_runtime.h>

#include <algorithm>

#include "megatron/kernels/activations.h"
#include "megatron/kernels/cuda_check.h"
#include "common.cuh"

namespace megatron::kernels {
namespace {

using detail::from_float;
using detail::load_vec;
using detail::store_vec;
using detail::to_float;
using detail::Vec;

constexpr int kThreads = 256;

struct ActivationParams {
  int64_t rows;
  int64_t features;        // gelu: row width; swiglu: width of each half (output width)
  const void* x;           // gelu: [rows, features]; swiglu: [rows, 2 * features]
  const void* bias;        // same width as a row of x, or null
  const void* grad_out;    // backward only: shaped like the forward output
  void* out;               // forward: output; backward: grad_input (shaped like x)
};

// Megatron's fused_bias_gelu.py, including its constants.
__device__ __forceinline__ float gelu_tanh(float y) {
  return 0.5f * y * (1.0f + tanhf(0.79788456f * y * (1.0f + 0.044715f * y * y)));
}

__device__ __forceinline__ float gelu_tanh_grad(float y) {
  const float t = tanhf(0.79788456f * y * (1.0f + 0.044715f * y * y));
  return 0.5f * y * ((1.0f - t * t) * (0.79788456f + 0.1070322243f * y * y)) + 0.5f * (1.0f + t);
}

__device__ __forceinline__ float sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

template <typename T, int N, bool kBackward>
__global__ void bias_gelu_kernel(ActivationParams p) {
  const T* x = static_cast<const T*>(p.x);
  const T* bias = static_cast<const T*>(p.bias);
  const T* grad_out = static_cast<const T*>(p.grad_out);
  T* out = static_cast<T*>(p.out);
  const int64_t row_vecs = p.features / N;
  const int64_t total = p.rows * row_vecs;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const Vec<T, N> xv = load_vec<T, N>(x, i);
    Vec<T, N> bv;
    if (bias != nullptr) bv = load_vec<T, N>(bias, i % row_vecs);
    Vec<T, N> gv;
    if constexpr (kBackward) gv = load_vec<T, N>(grad_out, i);
    Vec<T, N> ov;
#pragma unroll
    for (int e = 0; e < N; ++e) {
      const float y = to_float(xv.v[e]) + (bias != nullptr ? to_float(bv.v[e]) : 0.0f);
      if constexpr (kBackward) {
        ov.v[e] = from_float<T>(to_float(gv.v[e]) * gelu_tanh_grad(y));
      } else {
        ov.v[e] = from_float<T>(gelu_tanh(y));
      }
    }
    store_vec<T, N>(out, i, ov);
  }
}

template <typename T, int N, bool kBackward>
__global__ void swiglu_kernel(ActivationParams p) {
  const T* x = static_cast<const T*>(p.x);
  const T* bias = static_cast<const T*>(p.bias);
  const T* grad_out = static_cast<const T*>(p.grad_out);
  T* out = static_cast<T*>(p.out);
  const int64_t half_vecs = p.features / N;
  const int64_t total = p.rows * half_vecs;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t row = i / half_vecs;
    const int64_t col = i % half_vecs;
    const T* x_a = x + row * 2 * p.features;  // first half: the gate, through silu
    const T* x_b = x_a + p.features;          // second half: the linear part
    const Vec<T, N> av = load_vec<T, N>(x_a, col);
    const Vec<T, N> bv = load_vec<T, N>(x_b, col);
    Vec<T, N> bias_a, bias_b;
    if (bias != nullptr) {
      bias_a = load_vec<T, N>(bias, col);
      bias_b = load_vec<T, N>(bias + p.features, col);
    }
    if constexpr (kBackward) {
      const Vec<T, N> gv = load_vec<T, N>(grad_out, i);
      Vec<T, N> da, db;
#pragma unroll
      for (int e = 0; e < N; ++e) {
        const float a = to_float(av.v[e]) + (bias != nullptr ? to_float(bias_a.v[e]) : 0.0f);
        const float b = to_float(bv.v[e]) + (bias != nullptr ? to_float(bias_b.v[e]) : 0.0f);
        const float g = to_float(gv.v[e]);
        const float s = sigmoid(a);
        da.v[e] = from_float<T>(g * b * s * (1.0f + a * (1.0f - s)));
        db.v[e] = from_float<T>(g * a * s);
      }
      T* d_a = out + row * 2 * p.features;
      store_vec<T, N>(d_a, col, da);
      store_vec<T, N>(d_a + p.features, col, db);
    } else {
      Vec<T, N> ov;
#pragma unroll
      for (int e = 0; e < N; ++e) {
        const float a = to_float(av.v[e]) + (bias != nullptr ? to_float(bias_a.v[e]) : 0.0f);
        const float b = to_float(bv.v[e]) + (bias != nullptr ? to_float(bias_b.v[e]) : 0.0f);
        ov.v[e] = from_float<T>(a * sigmoid(a) * b);
      }
      store_vec<T, N>(out, i, ov);
    }
  }
}

enum class Activation { kBiasGelu, kSwiglu };

unsigned grid_for(int64_t items) {
  const int sms = detail::current_device_attribute(cudaDevAttrMultiProcessorCount);
  const int64_t blocks = (items + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, static_cast<int64_t>(sms) * 32));
}

template <Activation kAct, bool kBackward, typename T, int N>
void launch(const ActivationParams& p, cudaStream_t stream) {
  const unsigned grid = grid_for(p.rows * (p.features / N));
  if constexpr (kAct == Activation::kBiasGelu) {
    bias_gelu_kernel<T, N, kBackward><<<grid, kThreads, 0, stream>>>(p);
  } else {
    swiglu_kernel<T, N, kBackward><<<grid, kThreads, 0, stream>>>(p);
  }
  CHECK_CUDA(cudaGetLastError());
}

template <Activation kAct, bool kBackward>
void run(const char* name, DType dtype, const ActivationParams& p, cudaStream_t stream) {
  MEGATRON_CHECK(p.rows >= 0 && p.features > 0, name, ": rows = ", p.rows, ", features = ", p.features,
                 " must be >= 0 and > 0");
  MEGATRON_CHECK(p.x != nullptr && p.out != nullptr && (!kBackward || p.grad_out != nullptr), name,
                 ": input and output pointers must be set");
  if (p.rows == 0) return;
  const bool aligned = detail::aligned16(p.x) && detail::aligned16(p.bias) && detail::aligned16(p.grad_out) &&
                       detail::aligned16(p.out);
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = detail::kVec16<T>;
    if (aligned && p.features % kVec == 0) {
      launch<kAct, kBackward, T, kVec>(p, stream);
    } else {
      launch<kAct, kBackward, T, 1>(p, stream);
    }
  });
}

}  // namespace

void bias_gelu_fwd(DType dtype, int64_t rows, int64_t features, const void* x, const void* bias, void* out,
                   cudaStream_t stream) {
  run<Activation::kBiasGelu, false>("bias_gelu_fwd", dtype, {rows, features, x, bias, nullptr, out}, stream);
}

void bias_gelu_bwd(DType dtype, int64_t rows, int64_t features, const void* grad_out, const void* x,
                   const void* bias, void* grad_input, cudaStream_t stream) {
  run<Activation::kBiasGelu, true>("bias_gelu_bwd", dtype, {rows, features, x, bias, grad_out, grad_input},
                                   stream);
}

void swiglu_fwd(DType dtype, int64_t rows, int64_t features, const void* x, const void* bias, void* out,
                cudaStream_t stream) {
  run<Activation::kSwiglu, false>("swiglu_fwd", dtype, {rows, features, x, bias, nullptr, out}, stream);
}

void swiglu_bwd(DType dtype, int64_t rows, int64_t features, const void* grad_out, const void* x,
                const void* bias, void* grad_input, cudaStream_t stream) {
  run<Activation::kSwiglu, true>("swiglu_bwd", dtype, {rows, features, x, bias, grad_out, grad_input}, stream);
}

}  // namespace megatron::kernels
