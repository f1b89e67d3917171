// Rotary position embedding: the CUDA kernel against the ATen reference (forward) and autograd
// through the fp32 reference (backward) for half-split and interleaved pairs, full and partial
// rotation, strided inputs and every dtype (GPU, skipped without one); the reference against a
// hand-written per-element rotation and rope_freqs against spec 10.4 (CPU, always runs).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "gpu_test_support.h"
#include "megatron/core/check.h"
#include "megatron/kernels/aten/rope_ops.h"
#include "tensor_expect.h"

namespace megatron::kernels {
namespace {

using megatron::testing::expect_within_reference_error;
using megatron::testing::expect_close;
using megatron::testing::Tolerance;

// Element by element: pair (k, q) rotated by the angle at each position, rest copied.
at::Tensor hand_rotation(const at::Tensor& t, const at::Tensor& freqs, bool interleaved) {
  const at::Tensor x = t.to(at::kDouble).contiguous();
  const at::Tensor f = freqs.to(at::kDouble).contiguous();
  at::Tensor out = x.clone();
  const int64_t s = x.size(0), b = x.size(1), h = x.size(2), rot = f.size(1);
  auto xa = x.accessor<double, 4>();
  auto oa = out.accessor<double, 4>();
  auto fa = f.accessor<double, 2>();
  for (int64_t i = 0; i < s; ++i)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t n = 0; n < h; ++n)
        for (int64_t m = 0; m < rot / 2; ++m) {
          const int64_t k = interleaved ? 2 * m : m, q = interleaved ? 2 * m + 1 : m + rot / 2;
          oa[i][j][n][k] = xa[i][j][n][k] * std::cos(fa[i][k]) - xa[i][j][n][q] * std::sin(fa[i][k]);
          oa[i][j][n][q] = xa[i][j][n][q] * std::cos(fa[i][q]) + xa[i][j][n][k] * std::sin(fa[i][q]);
        }
  return out;
}

TEST(RopeReference, MatchesHandRotationAndAutogradOnCpu) {
  at::manual_seed(0);
  for (bool interleaved : {false, true}) {
    for (int64_t rot : {8, 4}) {  // full and partial (rotary_percent 0.5) rotation of hn = 8
      const at::Tensor t = at::randn({5, 2, 3, 8});
      const at::Tensor freqs = rope_freqs(7, rot, 10000.0, interleaved, at::kCPU);  // longer table than s
      const at::Tensor used = freqs.narrow(0, 0, 5);
      const at::Tensor y = rope_forward_reference(t, freqs, interleaved);
      expect_close(y.to(at::kDouble), hand_rotation(t, used, interleaved), Tolerance::elementwise(1e-6, 1e-5), "y");
      EXPECT_TRUE(at::equal(rope_forward(t, freqs, interleaved), y));  // CPU entry = reference
      // Backward = gradient of the forward.
      const at::Tensor leaf = t.detach().requires_grad_(true);
      const at::Tensor dy = at::randn_like(t);
      rope_forward_reference(leaf, freqs, interleaved).backward(dy);
      expect_close(rope_backward_reference(dy, freqs, interleaved), leaf.grad(), Tolerance::elementwise(1e-6, 1e-5), "rope_backward_reference(dy, freqs, interleaved)");
      // Rotation by -angle undoes the rotation.
      expect_close(rope_backward_reference(y, freqs, interleaved), t, Tolerance::elementwise(1e-5, 1e-5), "rope_backward_reference(y, freqs, interleaved)");
    }
  }
}

TEST(RopeReference, FreqsFollowSpec) {
  const at::Tensor half = rope_freqs(4, 6, 100.0, false, at::kCPU);
  const at::Tensor inter = rope_freqs(4, 6, 100.0, true, at::kCPU, 2.0);
  for (int64_t pos = 0; pos < 4; ++pos)
    for (int64_t i = 0; i < 3; ++i) {
      const double inv = 1.0 / std::pow(100.0, 2.0 * i / 6.0);
      EXPECT_NEAR(half[pos][i].item<double>(), pos * inv, 1e-5);
      EXPECT_NEAR(half[pos][i + 3].item<double>(), pos * inv, 1e-5);
      EXPECT_NEAR(inter[pos][2 * i].item<double>(), pos / 2.0 * inv, 1e-5);
      EXPECT_NEAR(inter[pos][2 * i + 1].item<double>(), pos / 2.0 * inv, 1e-5);
    }
}

TEST(RopeReference, RejectsBadShapes) {
  const at::Tensor t = at::randn({4, 1, 2, 8});
  EXPECT_THROW(rope_forward(t, at::zeros({4, 10}), false), megatron::Error);  // rot_dim > hn
  EXPECT_THROW(rope_forward(t, at::zeros({4, 3}), false), megatron::Error);   // odd rot_dim
  EXPECT_THROW(rope_forward(t, at::zeros({3, 8}), false), megatron::Error);   // too few positions
  EXPECT_THROW(rope_forward(at::randn({4, 8}), at::zeros({4, 8}), false), megatron::Error);
}

void check_case(const at::Tensor& t, const at::Tensor& freqs, bool interleaved, const std::string& what) {
  const at::Tensor dy = at::randn(t.sizes(), t.options());
  const at::Tensor y = rope_forward(t, freqs, interleaved);
  ASSERT_EQ(y.scalar_type(), t.scalar_type());
  const at::Tensor leaf = t.to(at::kFloat).detach().requires_grad_(true);
  const at::Tensor y_hi = rope_forward_reference(leaf, freqs, interleaved);
  y_hi.backward(dy.to(at::kFloat));
  expect_within_reference_error(y, rope_forward_reference(t, freqs, interleaved), y_hi, "forward " + what);
  expect_within_reference_error(rope_backward(dy, freqs, interleaved), rope_backward_reference(dy, freqs, interleaved),
                                leaf.grad(), "backward " + what);
  // Pass-through channels are copied exactly.
  const int64_t rot = freqs.size(-1);
  if (rot < t.size(3)) {
    EXPECT_TRUE(at::equal(y.narrow(3, rot, t.size(3) - rot), t.narrow(3, rot, t.size(3) - rot))) << what;
  }
}

TEST(RopeKernel, MatchesReferenceAcrossLayoutsDtypesAndPartialRotation) {
  MEGATRON_REQUIRE_GPU();
  at::manual_seed(1);
  const auto cuda = at::TensorOptions().device(at::kCUDA);
  for (at::ScalarType dtype : megatron::testing::kernel_dtypes()) {
    for (bool interleaved : {false, true}) {
      // (s, b, heads, hn, rot_dim): odd sequence lengths, odd head counts, partial rotation.
      const int64_t shapes[][5] = {{97, 2, 3, 64, 64}, {1025, 1, 5, 128, 64}, {7, 3, 1, 80, 40},
                                   {4097, 1, 2, 128, 128}, {33, 2, 4, 96, 32}};
      for (const auto& sh : shapes) {
        const at::Tensor t = at::randn({sh[0], sh[1], sh[2], sh[3]}, cuda).to(dtype);
        const at::Tensor freqs = rope_freqs(sh[0] + 3, sh[4], 10000.0, interleaved, t.device());
        const std::string what = std::string(c10::toString(dtype)) + (interleaved ? " interleaved" : " half") +
                                 " s=" + std::to_string(sh[0]) + " hn=" + std::to_string(sh[3]) +
                                 " rot=" + std::to_string(sh[4]);
        check_case(t, freqs, interleaved, what);
      }
    }
  }
}

TEST(RopeKernel, AcceptsStridedViewsAndArbitraryTables) {
  MEGATRON_REQUIRE_GPU();
  at::manual_seed(2);
  const auto cuda = at::TensorOptions().device(at::kCUDA);
  for (at::ScalarType dtype : megatron::testing::kernel_dtypes()) {
    for (bool interleaved : {false, true}) {
      // q as a view of a fused qkv tensor [s, b, ng, (np/ng + 2) * hn]: strided over s, b, heads.
      const at::Tensor qkv = at::randn({97, 2, 3, 4 * 64}, cuda).to(dtype);
      const at::Tensor q = qkv.narrow(3, 64, 64);  // [97, 2, 3, 64], strides (1536, 768, 256, 1)
      ASSERT_FALSE(q.is_contiguous());
      // A table whose paired entries differ ([s, 1, 1, rot] as Megatron passes it): exercises the
      // exact transpose rather than "rotation by minus a shared angle".
      const at::Tensor freqs = (at::rand({97, 1, 1, 48}, cuda) * 20 - 10);
      check_case(q, freqs, interleaved, std::string(c10::toString(dtype)) + " strided");
    }
  }
}

}  // namespace
}  // namespace megatron::kernels
