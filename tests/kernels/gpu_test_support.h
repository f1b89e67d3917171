// Shared pieces of the GPU parity tests: skipping without a GPU (with the reason printed), the
// sizes every op is swept over, and STYLE.md rule 9's tolerance: the kernel's error against an
// fp32 reference may be at most twice the error of the ATen reference run in the same low
// precision, plus a small floor; a failure prints the worst index.
#pragma once

#include <ATen/ATen.h>
#if MEGATRON_CUDA_KERNELS
#include <ATen/cuda/CUDAContext.h>
#endif
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace megatron::testing {

#if MEGATRON_CUDA_KERNELS
#define MEGATRON_REQUIRE_GPU()                                                                      \
  do {                                                                                              \
    if (!at::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible to this process; skipped";  \
  } while (false)
#else
#define MEGATRON_REQUIRE_GPU() GTEST_SKIP() << "built without nvcc: no CUDA kernels to test; skipped"
#endif

// Odd and tail sizes (STYLE.md rule 9) for a vectorised last dimension.
inline const std::vector<int64_t>& tail_sizes() {
  static const std::vector<int64_t> sizes = {1, 7, 97, 128, 1025, 4097, 8192};
  return sizes;
}

inline const std::vector<at::ScalarType>& kernel_dtypes() {
  static const std::vector<at::ScalarType> types = {at::kFloat, at::kBFloat16, at::kHalf};
  return types;
}

// Floors on the absolute error, per dtype, for values of order one.
inline double error_floor(at::ScalarType t) {
  return t == at::kFloat ? 1e-5 : (t == at::kBFloat16 ? 1e-2 : 2e-3);
}

// kernel, reference_low: results in the low precision; reference_fp32: the same op in fp32. The
// floor is for values of order one: it scales with `scale`, the magnitude the result's rounding
// errors grow with, by default the reference's largest value (a sum over many rows of values of
// order 100 has fp32 errors of order 1e-4).
inline void expect_within_reference_error(const at::Tensor& kernel, const at::Tensor& reference_low,
                                          const at::Tensor& reference_fp32, const std::string& what,
                                          double scale = 0.0) {
  const at::Tensor k = kernel.detach().to(at::kFloat).cpu().flatten();
  const at::Tensor lo = reference_low.detach().to(at::kFloat).cpu().flatten();
  const at::Tensor hi = reference_fp32.detach().to(at::kFloat).cpu().flatten();
  ASSERT_EQ(k.numel(), hi.numel()) << what;
  const at::Tensor kernel_err = (k - hi).abs();
  const double ref_err = (lo - hi).abs().max().item<double>();
  if (scale <= 0.0) scale = hi.numel() > 0 ? hi.abs().max().item<double>() : 1.0;
  const double bound = 2.0 * ref_err + error_floor(kernel.scalar_type()) * std::max(1.0, scale);
  const double worst = kernel_err.max().item<double>();
  if (!(worst <= bound)) {
    const int64_t i = kernel_err.argmax().item<int64_t>();
    ADD_FAILURE() << what << ": max error " << worst << " exceeds bound " << bound << " (ATen low-precision error "
                  << ref_err << ") at flat index " << i << ": kernel " << k[i].item<double>() << ", fp32 reference "
                  << hi[i].item<double>();
  }
}

}  // namespace megatron::testing
