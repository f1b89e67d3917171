// Validation shared by the ATen-facing entries in kernels/aten/*.cpp: the ATen dtype to kernel
// DType mapping and the per-tensor device/dtype/contiguity check. Internal header; messages name
// the op and the argument.
#pragma once

#include <ATen/ATen.h>

#include <optional>

#include "megatron/core/check.h"
#include "megatron/kernels/dtype.h"

namespace megatron::kernels::aten_detail {

// The kernel DType of an ATen dtype, or nullopt when no kernel handles it.
inline std::optional<DType> kernel_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return DType::kFloat32;
    case at::kBFloat16: return DType::kBFloat16;
    case at::kHalf: return DType::kFloat16;
    default: return std::nullopt;
  }
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
