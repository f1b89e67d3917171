// The one tensor comparison of the tests: shapes first, then both tensors as double on the CPU,
// and on failure the worst flat index with both values, the difference and the bound it broke.
// Test-only (GoogleTest non-fatal failures); tensors of any dtype and device, NaN always fails.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <string>

namespace megatron::testing {

// How far `actual` may be from `expected`, element by element: |a_i - e_i| <= atol + rtol * s_i,
// where s_i is |e_i| (elementwise) or max_j |e_j| (of_largest: the error is judged against the
// scale of the whole reference, for values that pass near zero).
struct Tolerance {
  enum class Relative { kElementwise, kToLargest };

  double atol = 0.0;
  double rtol = 0.0;
  Relative relative = Relative::kElementwise;

  static Tolerance absolute(double atol) { return {atol, 0.0, Relative::kElementwise}; }
  static Tolerance elementwise(double atol, double rtol) { return {atol, rtol, Relative::kElementwise}; }
  static Tolerance of_largest(double atol, double rtol) { return {atol, rtol, Relative::kToLargest}; }
};

namespace detail {

inline at::Tensor as_cpu_double(const at::Tensor& t) { return t.detach().to(at::kCPU, at::kDouble).reshape({-1}); }

// True when both are defined and have the same shape; otherwise a failure naming `what`.
inline bool same_shape(const at::Tensor& actual, const at::Tensor& expected, const std::string& what) {
  if (!actual.defined() || !expected.defined()) {
    ADD_FAILURE() << what << ": " << (actual.defined() ? "expected" : "actual") << " tensor is undefined";
    return false;
  }
  if (actual.sizes() != expected.sizes()) {
    ADD_FAILURE() << what << ": shape " << actual.sizes() << ", expected " << expected.sizes();
    return false;
  }
  return true;
}

}  // namespace detail

// Every element of `actual` within `tol` of `expected` (see Tolerance).
inline void expect_close(const at::Tensor& actual, const at::Tensor& expected, const Tolerance& tol,
                         const std::string& what) {
  if (!detail::same_shape(actual, expected, what) || actual.numel() == 0) return;
  const at::Tensor a = detail::as_cpu_double(actual), e = detail::as_cpu_double(expected);
  const at::Tensor diff = (a - e).abs();
  const bool of_largest = tol.relative == Tolerance::Relative::kToLargest;
  const double largest = e.abs().max().item<double>();
  const at::Tensor bound = of_largest ? at::full_like(e, tol.atol + tol.rtol * largest) : tol.atol + tol.rtol * e.abs();
  // The element furthest past its bound (argmax takes NaN as the largest, so NaN is reported).
  const at::Tensor excess = diff - bound;
  const std::int64_t i = excess.argmax().item<std::int64_t>();
  const double worst = excess[i].item<double>();
  if (worst <= 0.0) return;
  std::ostringstream how;
  how << "atol " << tol.atol << " + rtol " << tol.rtol << " x ";
  if (of_largest) {
    how << "largest |expected| " << largest;
  } else {
    how << "|expected|";
  }
  ADD_FAILURE() << what << ": worst flat index " << i << " of " << a.numel() << ": actual " << a[i].item<double>()
                << ", expected " << e[i].item<double>() << ", |difference| " << diff[i].item<double>()
                << " > bound " << bound[i].item<double>() << " (" << how.str() << ")";
}

// Every element of `actual` exactly equal to `expected` (compared as double: exact for every
// floating type up to 64 bits and integers up to 2^53).
inline void expect_equal(const at::Tensor& actual, const at::Tensor& expected, const std::string& what) {
  if (!detail::same_shape(actual, expected, what) || actual.numel() == 0) return;
  const at::Tensor a = detail::as_cpu_double(actual), e = detail::as_cpu_double(expected);
  const at::Tensor differ = a.ne(e);
  const std::int64_t count = differ.sum().item<std::int64_t>();
  if (count == 0) return;
  const std::int64_t i = (a - e).abs().masked_fill(differ.logical_not(), -1.0).argmax().item<std::int64_t>();
  ADD_FAILURE() << what << ": " << count << " of " << a.numel() << " elements differ; worst flat index " << i
                << ": actual " << a[i].item<double>() << ", expected " << e[i].item<double>();
}

}  // namespace megatron::testing
