// Scaled causal masked softmax: the CUDA kernel against the ATen reference over odd and tail
// lengths in every dtype (GPU, skipped without one), and the reference against an independent
// at::softmax with a triu mask plus autograd, and so are the CPU entries (CPU, always runs).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#include "gpu_test_support.h"
#include "megatron/core/check.h"
#include "megatron/kernels/aten/softmax_ops.h"
#if MEGATRON_CUDA_KERNELS
#include "megatron/kernels/causal_softmax.h"
#include "tensor_expect.h"
#endif

namespace megatron::kernels {
namespace {

using megatron::testing::expect_within_reference_error;
using megatron::testing::expect_close;
using megatron::testing::Tolerance;

// Independent forward: masked scores set to -inf before at::softmax, with autograd for dx.
std::pair<at::Tensor, at::Tensor> autograd_reference(const at::Tensor& x, const at::Tensor& dy, double scale) {
  const at::Tensor leaf = x.to(at::kFloat).detach().requires_grad_(true);
  const int64_t s = x.size(1);
  const at::Tensor mask = at::ones({s, s}, at::TensorOptions().dtype(at::kBool).device(x.device())).triu(1);
  const at::Tensor y = at::softmax((leaf * scale).masked_fill(mask, -1e30), -1);
  y.backward(dy.to(at::kFloat));
  return {y.detach(), leaf.grad()};
}

TEST(CausalSoftmaxReference, MatchesMaskedSoftmaxAndAutogradOnCpu) {
  at::manual_seed(0);
  for (int64_t s : {1, 5, 33}) {
    const at::Tensor x = at::randn({3, s, s}) * 3;
    const at::Tensor dy = at::randn({3, s, s});
    const auto [y_ref, dx_ref] = autograd_reference(x, dy, 0.7);
    const at::Tensor y = causal_softmax_forward_reference(x, 0.7);
    expect_close(y, y_ref, Tolerance::elementwise(1e-6, 1e-5), str_cat("s=", s));
    expect_close(causal_softmax_backward_reference(dy, y, 0.7), dx_ref, Tolerance::elementwise(1e-6, 1e-5), str_cat("s=", s));
    EXPECT_EQ(y.triu(1).abs().max().item<double>(), 0.0);  // masked probabilities exactly 0
    expect_close(y.sum(-1), at::ones({3, s}), Tolerance::elementwise(1e-6, 1e-5), "y.sum(-1)");
    // The CPU entries (ATen's fused softmax and its backward) give the same values.
    const at::Tensor y_entry = causal_softmax_forward(x, 0.7);
    expect_close(y_entry, y_ref, Tolerance::elementwise(1e-6, 1e-5), str_cat("s=", s));
    EXPECT_EQ(y_entry.triu(1).abs().max().item<double>(), 0.0);
    expect_close(causal_softmax_backward(dy, y_entry, 0.7), dx_ref, Tolerance::elementwise(1e-6, 1e-5), str_cat("s=", s));
  }
}

TEST(CausalSoftmaxReference, RejectsNonSquareScores) {
  EXPECT_THROW(causal_softmax_forward(at::randn({2, 3, 4}), 1.0), megatron::Error);
  EXPECT_THROW(causal_softmax_forward(at::randn({3, 3}), 1.0), megatron::Error);
}

void check_case(int64_t bh, int64_t s, at::ScalarType dtype, double scale) {
  const auto cuda = at::TensorOptions().device(at::kCUDA);
  const at::Tensor x32 = at::randn({bh, s, s}, cuda) * 2;
  const at::Tensor dy32 = at::randn({bh, s, s}, cuda);
  const at::Tensor x = x32.to(dtype), dy = dy32.to(dtype);
  const std::string what = std::string(c10::toString(dtype)) + " bh=" + std::to_string(bh) + " s=" + std::to_string(s);
  // fp32 truth from the low-precision inputs, by autograd.
  const auto [y_hi, dx_hi] = autograd_reference(x, dy, scale);
  const at::Tensor y = causal_softmax_forward(x, scale);
  ASSERT_EQ(y.scalar_type(), dtype);
  expect_within_reference_error(y, causal_softmax_forward_reference(x, scale), y_hi, "forward " + what);
  EXPECT_EQ(y.to(at::kFloat).triu(1).abs().max().item<double>(), 0.0) << what;
  // Backward from the kernel's own y against autograd through fp32 (which uses fp32 y).
  const at::Tensor dx = causal_softmax_backward(dy, y, scale);
  expect_within_reference_error(dx, causal_softmax_backward_reference(dy, y, scale), dx_hi, "backward " + what);
  EXPECT_EQ(dx.to(at::kFloat).triu(1).abs().max().item<double>(), 0.0) << what;
}

TEST(CausalSoftmaxKernel, MatchesReferenceOverTailLengthsAndDtypes) {
  MEGATRON_REQUIRE_GPU();
  at::manual_seed(1);
  for (at::ScalarType dtype : megatron::testing::kernel_dtypes()) {
    for (int64_t s : {1, 7, 16, 97, 128, 1025, 2048}) check_case(3, s, dtype, 0.125);
    check_case(1, 4097, dtype, 0.088);
  }
}

TEST(CausalSoftmaxKernel, HandlesRowsLongerThanSharedMemoryCache) {
  MEGATRON_REQUIRE_GPU();
  at::manual_seed(2);
  check_case(1, 16384, at::kBFloat16, 0.088);  // 64 KiB fp32 cache forward, 128 KiB backward
  check_case(1, 16401, at::kHalf, 0.088);      // odd length: scalar path
}

// The re-reading path (taken by rows beyond the shared-memory limit) forced on ordinary lengths;
// it must agree with the cached path bit for bit up to expf ordering (same arithmetic).
TEST(CausalSoftmaxKernel, UncachedPathMatchesCachedPath) {
  MEGATRON_REQUIRE_GPU();
#if MEGATRON_CUDA_KERNELS  // the raw launcher, below the ATen entry
  at::manual_seed(3);
  for (at::ScalarType dtype : megatron::testing::kernel_dtypes()) {
    for (int64_t s : {97, 1024, 1025}) {
      const at::Tensor x = at::randn({2, s, s}, at::TensorOptions().device(at::kCUDA)).to(dtype);
      // Both paths compute in fp32 but in a different order; a 16-bit output may then round to
      // the neighbouring value: one ulp of the dtype (2^-7 of the value in bf16, 2^-10 in fp16).
      const double ulp = dtype == at::kFloat ? 1e-6 : (dtype == at::kBFloat16 ? 0x1p-7 : 0x1p-10);
      const at::Tensor dy = at::randn_like(x);
      const at::Tensor cached = causal_softmax_forward(x, 0.3);
      at::Tensor uncached = at::empty_like(x);
      CausalSoftmaxFwdParams p;
      p.x = x.data_ptr();
      p.y = uncached.data_ptr();
      p.batch_heads = 2;
      p.sq = p.sk = s;
      p.scale = 0.3f;
      p.dtype = dtype == at::kFloat ? DType::kFloat32 : (dtype == at::kBFloat16 ? DType::kBFloat16 : DType::kFloat16);
      p.cache_row = false;
      launch_causal_softmax_fwd(p, at::cuda::getCurrentCUDAStream().stream());
      expect_close(cached.to(at::kFloat), uncached.to(at::kFloat), Tolerance::elementwise(1e-7, ulp), str_cat(s));
      const at::Tensor dx_cached = causal_softmax_backward(dy, cached, 0.3);
      at::Tensor dx_uncached = dy.clone();  // in place over dy: dx may alias dy
      CausalSoftmaxBwdParams b;
      b.dy = dx_uncached.data_ptr();
      b.y = cached.data_ptr();
      b.dx = dx_uncached.data_ptr();
      b.batch_heads = 2;
      b.sq = b.sk = s;
      b.scale = 0.3f;
      b.dtype = p.dtype;
      b.cache_row = false;
      launch_causal_softmax_bwd(b, at::cuda::getCurrentCUDAStream().stream());
      expect_close(dx_cached.to(at::kFloat), dx_uncached.to(at::kFloat), Tolerance::elementwise(1e-6, std::max(1e-5, ulp)),
                   str_cat(s));
    }
  }
#endif
}

}  // namespace
}  // namespace megatron::kernels
