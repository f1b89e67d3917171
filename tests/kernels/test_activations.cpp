// Bias + GeLU (tanh) and SwiGLU kernels against fp32 autograd on at::gelu(x, "tanh") and
// at::silu(a) * b, over odd and tail widths in every dtype, with and without bias, forward and
// backward (STYLE rule 9 tolerance). The *Reference tests need no GPU and run in CI.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#include "gpu_test_support.h"
#include "megatron/core/check.h"
#include "megatron/kernels/aten/activation_ops.h"
#include "tensor_expect.h"

namespace ka = megatron::kernels::aten;
using megatron::testing::expect_within_reference_error;
using megatron::testing::expect_close;
using megatron::testing::Tolerance;

namespace {

enum class Act { kBiasGelu, kSwiglu };

struct Truth {
  at::Tensor out, grad_input, grad_bias;
};

// fp32 autograd through torch's own ops on the upcast low-precision inputs.
Truth truth(Act act, const at::Tensor& x_low, const at::Tensor& bias_low, const at::Tensor& grad_out_low) {
  at::Tensor x = x_low.to(at::kFloat).clone().set_requires_grad(true);
  at::Tensor b;
  if (bias_low.defined()) b = bias_low.to(at::kFloat).clone().set_requires_grad(true);
  const at::Tensor y = b.defined() ? x + b : x;
  at::Tensor out;
  if (act == Act::kBiasGelu) {
    out = at::gelu(y, "tanh");
  } else {
    const auto halves = y.chunk(2, -1);
    out = at::silu(halves[0]) * halves[1];
  }
  (out * grad_out_low.to(at::kFloat)).sum().backward();
  return {out.detach(), x.grad(), b.defined() ? b.grad() : at::Tensor()};
}

void check_activation(Act act, int64_t rows, int64_t features, at::ScalarType dtype, bool with_bias,
                      const at::Tensor& given_x = {}) {
  const std::string what = std::string(act == Act::kBiasGelu ? "bias_gelu" : "swiglu") +
                           (with_bias ? "" : " (no bias)") + " rows=" + std::to_string(rows) +
                           " features=" + std::to_string(features) + " " + c10::toString(dtype);
  const auto f = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA);
  const int64_t in_width = act == Act::kSwiglu ? 2 * features : features;
  const at::Tensor x = given_x.defined() ? given_x : (2.0 * at::randn({rows, in_width}, f)).to(dtype);
  const at::Tensor bias = with_bias ? (0.5 * at::randn({in_width}, f)).to(dtype) : at::Tensor();
  const at::Tensor dy = at::randn({rows, features}, f).to(dtype);
  const bool gelu = act == Act::kBiasGelu;
  const at::Tensor k = gelu ? ka::bias_gelu_fwd(x, bias) : ka::swiglu_fwd(x, bias);
  const at::Tensor lo = gelu ? ka::bias_gelu_reference(x, bias) : ka::swiglu_reference(x, bias);
  const Truth t = truth(act, x, bias, dy);
  expect_within_reference_error(k, lo, t.out, what + " out");
  const ka::ActivationGrads kg = gelu ? ka::bias_gelu_bwd(dy, x, bias) : ka::swiglu_bwd(dy, x, bias);
  const ka::ActivationGrads lg = gelu ? ka::bias_gelu_bwd_reference(dy, x, bias) : ka::swiglu_bwd_reference(dy, x, bias);
  expect_within_reference_error(kg.grad_input, lg.grad_input, t.grad_input, what + " grad_input");
  if (with_bias) {
    expect_within_reference_error(kg.grad_bias, lg.grad_bias, t.grad_bias, what + " grad_bias");
  } else {
    EXPECT_FALSE(kg.grad_bias.defined()) << what;
  }
}

void sweep(Act act) {
  for (const at::ScalarType dtype : megatron::testing::kernel_dtypes()) {
    for (const int64_t features : megatron::testing::tail_sizes()) {
      for (const int64_t rows : {int64_t{1}, int64_t{37}, int64_t{1031}}) {
        for (const bool with_bias : {true, false}) check_activation(act, rows, features, dtype, with_bias);
      }
    }
  }
}

}  // namespace

TEST(ActivationKernels, BiasGeluMatchesFp32Reference) {
  MEGATRON_REQUIRE_GPU();
  sweep(Act::kBiasGelu);
}

TEST(ActivationKernels, SwigluMatchesFp32Reference) {
  MEGATRON_REQUIRE_GPU();
  sweep(Act::kSwiglu);
}

TEST(ActivationKernels, MisalignedStorageUsesScalarPath) {
  MEGATRON_REQUIRE_GPU();
  for (const at::ScalarType dtype : megatron::testing::kernel_dtypes()) {
    const auto opts = at::TensorOptions().dtype(dtype).device(at::kCUDA);
    for (const Act act : {Act::kBiasGelu, Act::kSwiglu}) {
      const int64_t width = act == Act::kSwiglu ? 2 * 512 : 512;
      at::Tensor x = at::empty({9 * width + 1}, opts).narrow(0, 1, 9 * width).view({9, width});
      x.copy_(at::randn({9, width}, opts));
      check_activation(act, 9, 512, dtype, true, x);
    }
  }
}

TEST(ActivationKernels, RejectsBadShapes) {
  MEGATRON_REQUIRE_GPU();
  const auto opts = at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA);
  EXPECT_THROW(ka::swiglu_fwd(at::randn({4, 7}, opts)), megatron::Error);  // odd width
  EXPECT_THROW(ka::bias_gelu_fwd(at::randn({4, 8}, opts), at::randn({4}, opts)), megatron::Error);
  EXPECT_THROW(ka::swiglu_bwd(at::randn({4, 8}, opts), at::randn({4, 8}, opts)), megatron::Error);  // dy width
  EXPECT_THROW(ka::bias_gelu_fwd(at::randn({8, 4}, opts).t()), megatron::Error);  // not contiguous
}

// ---- No GPU needed from here: the references against independent formulas. ----

TEST(ActivationReference, BiasGeluMatchesAtenGeluTanh) {
  at::manual_seed(11);
  const at::Tensor x = 3.0 * at::randn({17, 33});
  const at::Tensor b = at::randn({33});
  const at::Tensor dy = at::randn({17, 33});
  const Truth t = truth(Act::kBiasGelu, x, b, dy);
  expect_close(ka::bias_gelu_reference(x, b), t.out, Tolerance::elementwise(1e-6, 1e-5), "bias_gelu_reference(x, b)");
  const ka::ActivationGrads g = ka::bias_gelu_bwd_reference(dy, x, b);
  expect_close(g.grad_input, t.grad_input, Tolerance::elementwise(1e-5, 1e-5), "g.grad_input");
  expect_close(g.grad_bias, t.grad_bias, Tolerance::elementwise(1e-5, 1e-5), "g.grad_bias");
  expect_close(ka::bias_gelu_reference(x), at::gelu(x, "tanh"), Tolerance::elementwise(1e-6, 1e-5), "bias_gelu_reference(x)");
}

TEST(ActivationReference, SwigluMatchesAtenSilu) {
  at::manual_seed(12);
  for (const bool with_bias : {false, true}) {
    const at::Tensor x = 3.0 * at::randn({5, 3, 2 * 21});
    const at::Tensor b = with_bias ? at::randn({2 * 21}) : at::Tensor();
    const at::Tensor dy = at::randn({5, 3, 21});
    const Truth t = truth(Act::kSwiglu, x, b, dy);
    const at::Tensor out = ka::swiglu_reference(x, b);
    EXPECT_EQ(out.sizes(), dy.sizes());
    expect_close(out, t.out, Tolerance::elementwise(1e-6, 1e-5), "out");
    const ka::ActivationGrads g = ka::swiglu_bwd_reference(dy, x, b);
    expect_close(g.grad_input, t.grad_input, Tolerance::elementwise(1e-5, 1e-5), "g.grad_input");
    EXPECT_EQ(g.grad_bias.defined(), with_bias);
    if (with_bias) {
      expect_close(g.grad_bias, t.grad_bias, Tolerance::elementwise(1e-5, 1e-5), "g.grad_bias");
    }
  }
}

TEST(ActivationReference, LowPrecisionReferenceKeepsDtype) {
  const at::Tensor x = at::randn({4, 16}).to(at::kHalf);
  EXPECT_EQ(ka::bias_gelu_reference(x).scalar_type(), at::kHalf);
  EXPECT_EQ(ka::swiglu_reference(x).scalar_type(), at::kHalf);
  expect_close(ka::bias_gelu_reference(x).to(at::kFloat), at::gelu(x.to(at::kFloat), "tanh"), Tolerance::elementwise(2e-3, 2e-3), "bias_gelu_reference(x) in half");
}

// fp32 GeLU on CPU takes ATen's fused tanh GeLU; it must give what autograd gives, with and
// without bias. SwiGLU runs the reference itself.
TEST(ActivationCpuEntries, BiasGeluMatchesAutograd) {
  at::manual_seed(13);
  for (const bool with_bias : {false, true}) {
    const at::Tensor x = 3.0 * at::randn({4, 5, 33});
    const at::Tensor b = with_bias ? at::randn({33}) : at::Tensor();
    const at::Tensor dy = at::randn({4, 5, 33});
    const Truth t = truth(Act::kBiasGelu, x, b, dy);
    expect_close(ka::bias_gelu_fwd(x, b), t.out, Tolerance::elementwise(1e-6, 1e-5), "bias_gelu_fwd(x, b)");
    const ka::ActivationGrads g = ka::bias_gelu_bwd(dy, x, b);
    expect_close(g.grad_input, t.grad_input, Tolerance::elementwise(1e-5, 1e-5), "g.grad_input");
    EXPECT_EQ(g.grad_bias.defined(), with_bias);
    if (with_bias) {
      expect_close(g.grad_bias, t.grad_bias, Tolerance::elementwise(1e-5, 1e-5), "g.grad_bias");
    }
  }
  const at::Tensor x = at::randn({2, 8}), bias = at::randn({8}), g = at::randn({2, 4});
  EXPECT_TRUE(at::equal(ka::swiglu_fwd(x, bias), ka::swiglu_reference(x, bias)));
  EXPECT_TRUE(at::equal(ka::swiglu_bwd(g, x, bias).grad_input, ka::swiglu_bwd_reference(g, x, bias).grad_input));
}
