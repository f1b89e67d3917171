// CHECK_CUDA(expr): throws megatron::Error naming the expression, source line and CUDA's message
// when a runtime call fails. The CUDA sibling of MEGATRON_CHECK; usable from .cu and .cpp files.
#pragma once

#include <cuda_runtime_api.h>

#include "megatron/core/check.h"

#define CHECK_CUDA(expr)                                                                    \
  do {                                                                                      \
    const cudaError_t megatron_cuda_status_ = (expr);                                       \
    if (__builtin_expect(megatron_cuda_status_ != cudaSuccess, 0)) {                                \
      ::megatron::throw_error(::megatron::str_cat("CUDA error at ", __FILE__, ":", __LINE__, \
                                                  ": ", #expr, ": ",                        \
                                                  cudaGetErrorString(megatron_cuda_status_))); \
    }                                                                                       \
  } while (false)
