// Dispatch and validation shared by the ATen-facing entries in kernels/aten/*.cpp: whether a
// tensor takes the hand-written kernel (a CUDA tensor of a kernel dtype, in a build with the
// kernels) or the ATen reference, the ATen dtype to kernel DType mapping and the per-tensor
// device/dtype/contiguity check. Internal header; messages name the op and the argument.
// MEGATRON_CUDA_KERNELS (kernels/CMakeLists.txt) is 1 when nvcc and a CUDA LibTorch are present;
// the CUDA-only parts of the entries are compiled only then.
#pragma once

#include <ATen/ATen.h>

#include <optional>

#include "megatron/core/check.h"

#if MEGATRON_CUDA_KERNELS
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "megatron/kernels/dtype.h"
#else
namespace megatron::kernels {
enum class DType { kFloat32, kBFloat16, kFloat16 };  // as dtype.h, which needs the CUDA headers
}  // namespace megatron::kernels
#endif

namespace megatron::kernels::aten_detail {

inline constexpr bool kCudaKernels = MEGATRON_CUDA_KERNELS != 0;

// The kernel DType of an ATen dtype, or nullopt when no kernel handles it.
inline std::optional<DType> kernel_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return DType::kFloat32;
    case at::kBFloat16: return DType::kBFloat16;
    case at::kHalf: return DType::kFloat16;
    default: return std::nullopt;
  }
}

// Whether `t` runs on the hand-written kernels: a CUDA tensor of float32, bfloat16 or float16 with
// elements, in a build with the kernels. Everything else takes the ATen reference.
inline bool on_kernel_path(const at::Tensor& t) {
  return kCudaKernels && t.defined() && t.is_cuda() && kernel_dtype(t.scalar_type()).has_value() && t.numel() > 0;
}

// As kernel_dtype, throwing "<op>: <name> has dtype ..." for a dtype no kernel handles.
inline DType require_kernel_dtype(const char* op, const char* name, at::ScalarType t) {
  const std::optional<DType> dtype = kernel_dtype(t);
  if (!dtype) MEGATRON_FAIL(op, ": ", name, " has dtype ", t, "; expected float32, bfloat16 or float16");
  return *dtype;
}

// `t` must be defined, on x's CUDA device, of x's dtype and contiguous.
inline void check_tensor(const char* op, const char* name, const at::Tensor& t, const at::Tensor& x) {
  MEGATRON_CHECK(t.defined(), op, ": ", name, " is undefined");
  MEGATRON_CHECK(t.is_cuda(), op, ": ", name, " must be a CUDA tensor (got ", t.device(),
                 "); use the *_reference functions for CPU tensors");
  MEGATRON_CHECK(t.device() == x.device(), op, ": ", name, " is on ", t.device(), " but x is on ", x.device());
  MEGATRON_CHECK(t.scalar_type() == x.scalar_type(), op, ": ", name, " has dtype ", t.scalar_type(),
                 " but x has ", x.scalar_type(), "; convert them to one dtype");
  MEGATRON_CHECK(t.is_contiguous(), op, ": ", name, " must be contiguous (call .contiguous())");
}

}  // namespace megatron::kernels::aten_detail
