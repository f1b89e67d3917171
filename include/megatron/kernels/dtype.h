// Element types the fused kernels take, and a compile-time dispatch over them. Every kernel
// reduces in fp32 whatever its input type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "megatron/core/check.h"

namespace megatron::kernels {

enum class DType { kFloat32, kBFloat16, kFloat16 };

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat16: return "float16";
  }
  return "?";
}

// Calls fn(T{}) with T = float, __nv_bfloat16 or __half for `t`.
template <typename Fn>
decltype(auto) dispatch_dtype(DType t, Fn&& fn) {
  switch (t) {
    case DType::kFloat32: return fn(float{});
    case DType::kBFloat16: return fn(__nv_bfloat16{});
    case DType::kFloat16: return fn(__half{});
  }
  MEGATRON_FAIL("unknown kernel dtype");
}

}  // namespace megatron::kernels
