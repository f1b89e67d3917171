// The tests' tensor comparison (tensor_expect.h) on hand-made cases: each tolerance passes at its
// bound and fails just past it, the failure names the worst flat index with both values, and NaN
// or a shape mismatch always fails.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <limits>

#include "tensor_expect.h"

namespace megatron::testing {
namespace {

at::Tensor values(std::initializer_list<double> v) { return at::tensor(std::vector<double>(v), at::kDouble); }

TEST(TensorExpect, AbsoluteBoundIsInclusive) {
  expect_close(values({2.0, -1.0}), values({2.5, -1.0}), Tolerance::absolute(0.5), "at the bound");
  EXPECT_NONFATAL_FAILURE(
      expect_close(values({2.0, -1.0}), values({2.5, -1.0}), Tolerance::absolute(0.49), "past it"),
      "past it: worst flat index 0 of 2: actual 2, expected 2.5");
}

TEST(TensorExpect, ElementwiseRelativePartScalesWithEachElement) {
  // |1.5 - 1| = 0.5 is past 1% of 1; |100.5 - 100| = 0.5 is within 1% of 100.
  EXPECT_NONFATAL_FAILURE(
      expect_close(values({1.5, 100.5}), values({1.0, 100.0}), Tolerance::elementwise(0.0, 0.01), "small"),
      "worst flat index 0");
  expect_close(values({1.005, 100.5}), values({1.0, 100.0}), Tolerance::elementwise(0.0, 0.01), "both within 1%");
}

TEST(TensorExpect, OfLargestJudgesEveryElementAgainstTheLargestReference) {
  // 0.5 away from a reference 0 is fine against 1% of max |expected| = 100 (bound 1.001).
  expect_close(values({0.5, 100.0}), values({0.0, 100.0}), Tolerance::of_largest(1e-3, 0.01), "near zero");
  EXPECT_NONFATAL_FAILURE(
      expect_close(values({0.5, 100.0}), values({0.0, 100.0}), Tolerance::elementwise(1e-3, 0.01), "elementwise"),
      "worst flat index 0");
  EXPECT_NONFATAL_FAILURE(
      expect_close(values({1.2, 100.0}), values({0.0, 100.0}), Tolerance::of_largest(1e-3, 0.01), "past"),
      "> bound 1.0009");
}

TEST(TensorExpect, NamesTheWorstFlatIndexOfAShapedTensor) {
  const at::Tensor expected = at::arange(6, at::kFloat).view({2, 3});
  at::Tensor actual = expected.clone();
  actual[0][1] = 1.5f;  // off by 0.5
  actual[1][1] = 7.0f;  // flat index 4, off by 3: the worst
  EXPECT_NONFATAL_FAILURE(expect_close(actual, expected, Tolerance::absolute(0.1), "shaped"),
                          "shaped: worst flat index 4 of 6: actual 7, expected 4");
  EXPECT_NONFATAL_FAILURE(expect_equal(actual, expected, "exact"),
                          "exact: 2 of 6 elements differ; worst flat index 4: actual 7, expected 4");
}

TEST(TensorExpect, NanAndShapeMismatchAlwaysFail) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NONFATAL_FAILURE(expect_close(values({1.0, nan}), values({1.0, 2.0}), Tolerance::absolute(1e9), "nan"),
                          "worst flat index 1");
  EXPECT_NONFATAL_FAILURE(expect_close(values({1.0, 2.0}), values({nan, 2.0}), Tolerance::of_largest(1e9, 1.0), "ref"),
                          "worst flat index");
  EXPECT_NONFATAL_FAILURE(expect_equal(values({nan}), values({nan}), "nan equal"), "1 of 1 elements differ");
  EXPECT_NONFATAL_FAILURE(expect_close(at::zeros({2, 3}), at::zeros({3, 2}), Tolerance::absolute(1.0), "shape"),
                          "shape: shape [2, 3], expected [3, 2]");
  EXPECT_NONFATAL_FAILURE(expect_equal(at::Tensor(), at::zeros({1}), "undefined"), "actual tensor is undefined");
}

TEST(TensorExpect, ComparesValuesAcrossDtypes) {
  const at::Tensor exact = at::arange(8, at::kFloat) / 4;  // representable in bf16
  expect_equal(exact.to(at::kBFloat16), exact, "bf16 against fp32");
  expect_equal(at::arange(5, at::kLong), at::arange(5, at::kDouble), "int64 against double");
}

}  // namespace
}  // namespace megatron::testing
