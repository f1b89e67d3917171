// Multi-tensor AdamW and all-finite check (see multi_tensor_adamw.h). Invariants: one block per
// chunk of kChunk elements of one tensor; a launch covers at most kMaxTensors tensors and every
// chunk of each (no tensor is split across launches), and a block finds its tensor by binary search
// over the launch's block offsets. All arithmetic is fp32. Chunks start at multiples of kChunk, so
// a tensor's 16-byte alignment holds at every chunk start.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>

#include "common.cuh"
#include "megatron/kernels/cuda_check.h"
#include "megatron/kernels/multi_tensor_adamw.h"

namespace megatron::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kVec = 4;                                  // elements per vector access
constexpr std::int64_t kChunk = kThreads * kVec * 16;    // elements per block: 16 vectors a thread
constexpr int kMaxTensors = 48;                          // keeps the params under 4 KiB of kernel args

// Which blocks of a launch belong to which tensor: tensor t owns [block_start[t], block_start[t+1]).
struct ChunkTable {
  int count = 0;
  int block_start[kMaxTensors + 1] = {};
};

struct AdamWScalars {
  float grad_scale;
  float beta1_weight;   // 1 - beta1, the lerp weight
  float beta2;
  float one_minus_beta2;
  float eps;
  float step_size;      // lr / (1 - beta1^step)
  float bc2_sqrt;       // sqrt(1 - beta2^step)
};

struct AdamWParams {
  ChunkTable table;
  float* param[kMaxTensors];
  const void* grad[kMaxTensors];
  float* exp_avg[kMaxTensors];
  float* exp_avg_sq[kMaxTensors];
  void* param_copy[kMaxTensors];
  std::int64_t numel[kMaxTensors];
  float decay_factor[kMaxTensors];  // 1 - lr * weight_decay, or 1 for tensors without decay
  AdamWScalars s;
  int* found_inf;
  InfCheck inf_check;
};

struct AllFiniteParams {
  ChunkTable table;
  const void* grad[kMaxTensors];
  std::int64_t numel[kMaxTensors];
  float grad_scale;
  int* found_inf;
};

static_assert(sizeof(AdamWParams) <= 4096, "kernel arguments must stay under 4 KiB");

template <typename T>
using Vec = detail::Vec<T, kVec>;

using detail::aligned;
using detail::from_float;
using detail::to_float;

__device__ __forceinline__ int find_tensor(const ChunkTable& table, int block) {
  int lo = 0;
  int hi = table.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (table.block_start[mid] <= block) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// One element, in torch.optim.AdamW's order (torch's lerp formula included).
__device__ __forceinline__ void adamw_element(float& p, float grad, float& m, float& v, float decay_factor,
                                              const AdamWScalars& s, bool& nonfinite) {
  const float g = grad * s.grad_scale;
  nonfinite |= !isfinite(g);
  p *= decay_factor;
  m = s.beta1_weight < 0.5f ? m + s.beta1_weight * (g - m) : g - (g - m) * (1.0f - s.beta1_weight);
  v = v * s.beta2 + s.one_minus_beta2 * (g * g);
  const float denom = sqrtf(v) / s.bc2_sqrt + s.eps;
  p = p + (-s.step_size) * (m / denom);
}

template <typename GradT, typename CopyT>
__global__ void __launch_bounds__(kThreads) multi_tensor_adamw_kernel(const __grid_constant__ AdamWParams params) {
  if (params.inf_check == InfCheck::kSkipIfSet && *params.found_inf != 0) return;  // uniform per block
  const int t = find_tensor(params.table, static_cast<int>(blockIdx.x));
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x - params.table.block_start[t]) * kChunk;
  const std::int64_t end = min(params.numel[t], begin + kChunk);
  float* __restrict__ p = params.param[t];
  const GradT* __restrict__ g = static_cast<const GradT*>(params.grad[t]);
  float* __restrict__ m = params.exp_avg[t];
  float* __restrict__ v = params.exp_avg_sq[t];
  CopyT* __restrict__ c = static_cast<CopyT*>(params.param_copy[t]);
  const float decay = params.decay_factor[t];
  bool nonfinite = false;

  std::int64_t scalar_begin = begin;
  const bool vectorised = aligned(p, 16) && aligned(m, 16) && aligned(v, 16) && aligned(g, sizeof(Vec<GradT>)) &&
                          (c == nullptr || aligned(c, sizeof(Vec<CopyT>)));
  if (vectorised) {
    const std::int64_t vec_end = begin + (end - begin) / kVec * kVec;
    for (std::int64_t i = begin + threadIdx.x * kVec; i < vec_end; i += kThreads * kVec) {
      Vec<float> pv = *reinterpret_cast<const Vec<float>*>(p + i);
      const Vec<GradT> gv = *reinterpret_cast<const Vec<GradT>*>(g + i);
      Vec<float> mv = *reinterpret_cast<const Vec<float>*>(m + i);
      Vec<float> vv = *reinterpret_cast<const Vec<float>*>(v + i);
#pragma unroll
      for (int k = 0; k < kVec; ++k) adamw_element(pv.v[k], to_float(gv.v[k]), mv.v[k], vv.v[k], decay, params.s, nonfinite);
      *reinterpret_cast<Vec<float>*>(p + i) = pv;
      *reinterpret_cast<Vec<float>*>(m + i) = mv;
      *reinterpret_cast<Vec<float>*>(v + i) = vv;
      if (c != nullptr) {
        Vec<CopyT> cv;
#pragma unroll
        for (int k = 0; k < kVec; ++k) cv.v[k] = from_float<CopyT>(pv.v[k]);
        *reinterpret_cast<Vec<CopyT>*>(c + i) = cv;
      }
    }
    scalar_begin = vec_end;
  }
  for (std::int64_t i = scalar_begin + threadIdx.x; i < end; i += kThreads) {
    float pi = p[i];
    float mi = m[i];
    float vi = v[i];
    adamw_element(pi, to_float(g[i]), mi, vi, decay, params.s, nonfinite);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
    if (c != nullptr) c[i] = from_float<CopyT>(pi);
  }
  if (params.inf_check == InfCheck::kReport) {
    if (__syncthreads_or(nonfinite) && threadIdx.x == 0) *params.found_inf = 1;
  }
}

template <typename GradT>
__global__ void __launch_bounds__(kThreads) multi_tensor_all_finite_kernel(const __grid_constant__ AllFiniteParams params) {
  // Already known; the flag only ever goes 0 -> 1. Other blocks of this launch may set it while this
  // block runs, so one thread reads it: every thread must take the same branch to the barrier below.
  __shared__ int known;
  if (threadIdx.x == 0) known = *params.found_inf;
  __syncthreads();
  if (known != 0) return;
  const int t = find_tensor(params.table, static_cast<int>(blockIdx.x));
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x - params.table.block_start[t]) * kChunk;
  const std::int64_t end = min(params.numel[t], begin + kChunk);
  const GradT* __restrict__ g = static_cast<const GradT*>(params.grad[t]);
  bool nonfinite = false;
  std::int64_t scalar_begin = begin;
  if (aligned(g, sizeof(Vec<GradT>))) {
    const std::int64_t vec_end = begin + (end - begin) / kVec * kVec;
    for (std::int64_t i = begin + threadIdx.x * kVec; i < vec_end; i += kThreads * kVec) {
      const Vec<GradT> gv = *reinterpret_cast<const Vec<GradT>*>(g + i);
#pragma unroll
      for (int k = 0; k < kVec; ++k) nonfinite |= !isfinite(to_float(gv.v[k]) * params.grad_scale);
    }
    scalar_begin = vec_end;
  }
  for (std::int64_t i = scalar_begin + threadIdx.x; i < end; i += kThreads) {
    nonfinite |= !isfinite(to_float(g[i]) * params.grad_scale);
  }
  if (__syncthreads_or(nonfinite) && threadIdx.x == 0) *params.found_inf = 1;
}

// Calls flush(table, members) for consecutive groups of at most kMaxTensors non-empty tensors,
// members[j] being the index into numels of the table's tensor j.
template <typename Flush>
void for_each_launch(const std::vector<std::int64_t>& numels, Flush&& flush) {
  ChunkTable table;
  std::vector<std::size_t> members;
  for (std::size_t i = 0; i < numels.size(); ++i) {
    MEGATRON_CHECK(numels[i] >= 0, "multi-tensor op: tensor ", i, " has negative numel ", numels[i]);
    if (numels[i] == 0) continue;
    const std::int64_t blocks = (numels[i] + kChunk - 1) / kChunk;
    MEGATRON_CHECK(blocks < INT_MAX / 2, "multi-tensor op: tensor ", i, " has ", numels[i],
                   " elements, more than one launch can cover");
    if (table.count == kMaxTensors || table.block_start[table.count] + blocks > INT_MAX) {
      flush(table, members);
      table = ChunkTable{};
      members.clear();
    }
    members.push_back(i);
    table.block_start[table.count + 1] = table.block_start[table.count] + static_cast<int>(blocks);
    ++table.count;
  }
  if (table.count > 0) flush(table, members);
}

template <typename GradT, typename CopyT>
void launch_adamw(const std::vector<AdamWTensorArgs>& tensors, const AdamWHyperparams& hyper, const AdamWScalars& s,
                  int* found_inf, InfCheck inf_check, cudaStream_t stream) {
  std::vector<std::int64_t> numels;
  for (const auto& t : tensors) numels.push_back(t.numel);
  const float decay_factor = static_cast<float>(1.0 - hyper.lr * hyper.weight_decay);
  for_each_launch(numels, [&](const ChunkTable& table, const std::vector<std::size_t>& members) {
    AdamWParams params{};
    params.table = table;
    for (int j = 0; j < table.count; ++j) {
      const AdamWTensorArgs& t = tensors[members[j]];
      params.param[j] = t.param;
      params.grad[j] = t.grad;
      params.exp_avg[j] = t.exp_avg;
      params.exp_avg_sq[j] = t.exp_avg_sq;
      params.param_copy[j] = t.param_copy;
      params.numel[j] = t.numel;
      params.decay_factor[j] = t.decay ? decay_factor : 1.0f;
    }
    params.s = s;
    params.found_inf = found_inf;
    params.inf_check = inf_check;
    multi_tensor_adamw_kernel<GradT, CopyT><<<table.block_start[table.count], kThreads, 0, stream>>>(params);
    CHECK_CUDA(cudaGetLastError());
  });
}

}  // namespace

void multi_tensor_adamw(const std::vector<AdamWTensorArgs>& tensors, DType grad_dtype, DType copy_dtype,
                        const AdamWHyperparams& hyper, int* found_inf, InfCheck inf_check, cudaStream_t stream) {
  MEGATRON_CHECK(hyper.lr >= 0.0, "multi_tensor_adamw: lr must be >= 0, got ", hyper.lr);
  MEGATRON_CHECK(hyper.beta1 >= 0.0 && hyper.beta1 < 1.0, "multi_tensor_adamw: beta1 must be in [0, 1), got ", hyper.beta1);
  MEGATRON_CHECK(hyper.beta2 >= 0.0 && hyper.beta2 < 1.0, "multi_tensor_adamw: beta2 must be in [0, 1), got ", hyper.beta2);
  MEGATRON_CHECK(hyper.eps > 0.0, "multi_tensor_adamw: eps must be > 0, got ", hyper.eps);
  MEGATRON_CHECK(hyper.step >= 1, "multi_tensor_adamw: step is 1-based, got ", hyper.step);
  MEGATRON_CHECK(inf_check == InfCheck::kNone || found_inf != nullptr,
                 "multi_tensor_adamw: an inf check needs a found_inf flag");
  bool any_copy = false;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const AdamWTensorArgs& t = tensors[i];
    MEGATRON_CHECK(t.numel == 0 || (t.param && t.grad && t.exp_avg && t.exp_avg_sq),
                   "multi_tensor_adamw: tensor ", i, " has a null param, grad or moment pointer");
    any_copy |= t.param_copy != nullptr;
  }
  MEGATRON_CHECK(!any_copy || copy_dtype != DType::kFloat32,
                 "multi_tensor_adamw: the param copy must be bfloat16 or float16, got float32");

  const double bc1 = 1.0 - std::pow(hyper.beta1, static_cast<double>(hyper.step));
  const double bc2 = 1.0 - std::pow(hyper.beta2, static_cast<double>(hyper.step));
  const AdamWScalars s{static_cast<float>(hyper.grad_scale), static_cast<float>(1.0 - hyper.beta1),
                       static_cast<float>(hyper.beta2),      static_cast<float>(1.0 - hyper.beta2),
                       static_cast<float>(hyper.eps),        static_cast<float>(hyper.lr / bc1),
                       static_cast<float>(std::sqrt(bc2))};
  dispatch_dtype(grad_dtype, [&](auto grad_tag) {
    using GradT = decltype(grad_tag);
    if (copy_dtype == DType::kFloat16) {
      launch_adamw<GradT, __half>(tensors, hyper, s, found_inf, inf_check, stream);
    } else {
      launch_adamw<GradT, __nv_bfloat16>(tensors, hyper, s, found_inf, inf_check, stream);
    }
  });
}

void multi_tensor_all_finite(const std::vector<const void*>& grads, const std::vector<std::int64_t>& numels,
                             DType grad_dtype, double grad_scale, int* found_inf, cudaStream_t stream) {
  MEGATRON_CHECK(grads.size() == numels.size(), "multi_tensor_all_finite: ", grads.size(), " grads but ",
                 numels.size(), " sizes");
  MEGATRON_CHECK(found_inf != nullptr, "multi_tensor_all_finite: found_inf is null");
  for (std::size_t i = 0; i < grads.size(); ++i) {
    MEGATRON_CHECK(numels[i] == 0 || grads[i] != nullptr, "multi_tensor_all_finite: grad ", i, " is null");
  }
  dispatch_dtype(grad_dtype, [&](auto grad_tag) {
    using GradT = decltype(grad_tag);
    for_each_launch(numels, [&](const ChunkTable& table, const std::vector<std::size_t>& members) {
      AllFiniteParams params{};
      params.table = table;
      for (int j = 0; j < table.count; ++j) {
        params.grad[j] = grads[members[j]];
        params.numel[j] = numels[members[j]];
      }
      params.grad_scale = static_cast<float>(grad_scale);
      params.found_inf = found_inf;
      multi_tensor_all_finite_kernel<GradT><<<table.block_start[table.count], kThreads, 0, stream>>>(params);
      CHECK_CUDA(cudaGetLastError());
    });
  });
}

}  // namespace megatron::kernels
