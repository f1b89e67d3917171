// LayerNorm / RMSNorm kernels against an fp32 autograd reference (at::layer_norm, a hand-written
// RMSNorm) over odd and tail shapes in every dtype, forward and backward, with and without the fused
// residual add (STYLE rule 9 tolerance). The *Reference tests need no GPU: they check the plain
// ATen references against independent formulas, so CI exercises them.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "megatron/core/check.h"
#include "megatron/kernels/aten/norm_ops.h"
#include "tensor_expect.h"

namespace ka = megatron::kernels::aten;
using megatron::testing::expect_within_reference_error;
using megatron::testing::expect_close;
using megatron::testing::Tolerance;

namespace {

constexpr double kEps = 1e-5;

struct Inputs {
  at::Tensor x, residual, weight, bias, grad_out, grad_residual;  // low precision
};

Inputs make_inputs(int64_t rows, int64_t hidden, at::ScalarType dtype, at::Device device, bool residual,
                   bool bias) {
  const auto f = at::TensorOptions().dtype(at::kFloat).device(device);
  Inputs in;
  in.x = (at::randn({rows, hidden}, f) * 2.0 + 0.5).to(dtype);
  if (residual) in.residual = at::randn({rows, hidden}, f).to(dtype);
  in.weight = (1.0 + 0.2 * at::randn({hidden}, f)).to(dtype);
  if (bias) in.bias = (0.1 * at::randn({hidden}, f)).to(dtype);
  in.grad_out = at::randn({rows, hidden}, f).to(dtype);
  if (residual) in.grad_residual = at::randn({rows, hidden}, f).to(dtype);
  return in;
}

struct Truth {
  at::Tensor out, grad_input, grad_weight, grad_bias;
};

// fp32 autograd on the (upcast) low-precision inputs: loss = <out, dy> + <x + residual, d_residual>.
Truth truth(bool rms, const Inputs& in) {
  const int64_t hidden = in.x.size(-1);
  at::Tensor x = in.x.to(at::kFloat).clone().set_requires_grad(true);
  at::Tensor w = in.weight.to(at::kFloat).clone().set_requires_grad(true);
  at::Tensor b;
  if (in.bias.defined()) b = in.bias.to(at::kFloat).clone().set_requires_grad(true);
  const at::Tensor s = in.residual.defined() ? x + in.residual.to(at::kFloat) : x;
  at::Tensor out;
  if (rms) {
    out = s * at::rsqrt(s.square().mean({-1}, true) + kEps) * w;
  } else {
    out = at::layer_norm(s, {hidden}, w, b, kEps);
  }
  at::Tensor loss = (out * in.grad_out.to(at::kFloat)).sum();
  if (in.grad_residual.defined()) loss = loss + (s * in.grad_residual.to(at::kFloat)).sum();
  loss.backward();
  return {out.detach(), x.grad(), w.grad(), b.defined() ? b.grad() : at::Tensor()};
}

void expect_stats_close(const at::Tensor& kernel, const at::Tensor& reference, const std::string& what) {
  ASSERT_EQ(kernel.scalar_type(), at::kFloat) << what;
  const at::Tensor k = kernel.cpu();
  const at::Tensor r = reference.cpu().to(at::kFloat);
  expect_close(k, r, Tolerance::elementwise(1e-5, 1e-4), what);
}

void check_norm(bool rms, int64_t rows, int64_t hidden, at::ScalarType dtype, bool residual, bool bias,
                const Inputs* given = nullptr) {
  const std::string what = std::string(rms ? "rms_norm" : "layer_norm") + (residual ? "+residual" : "") +
                           (bias ? "" : " (no bias)") + " rows=" + std::to_string(rows) +
                           " hidden=" + std::to_string(hidden) + " " + c10::toString(dtype);
  const Inputs in = given ? *given : make_inputs(rows, hidden, dtype, at::kCUDA, residual, bias);
  const ka::NormOutputs k = rms ? ka::rms_norm_fwd(in.x, in.weight, kEps, in.residual)
                                : ka::layer_norm_fwd(in.x, in.weight, in.bias, kEps, in.residual);
  const ka::NormOutputs lo = rms ? ka::rms_norm_reference(in.x, in.weight, kEps, in.residual)
                                 : ka::layer_norm_reference(in.x, in.weight, in.bias, kEps, in.residual);
  const Truth t = truth(rms, in);
  expect_within_reference_error(k.out, lo.out, t.out, what + " out");
  expect_stats_close(k.rstd, lo.rstd, what + " rstd");
  if (!rms) expect_stats_close(k.mean, lo.mean, what + " mean");
  if (residual) {
    ASSERT_TRUE(k.residual_out.defined()) << what;
    EXPECT_TRUE(at::equal(k.residual_out, in.x + in.residual)) << what << ": residual_out is not x + residual";
  }
  const at::Tensor& input = residual ? k.residual_out : in.x;
  const ka::NormGrads kg = rms ? ka::rms_norm_bwd(in.grad_out, input, in.weight, k.rstd, in.grad_residual)
                               : ka::layer_norm_bwd(in.grad_out, input, in.weight, k.mean, k.rstd, bias,
                                                    in.grad_residual);
  const ka::NormGrads lg =
      rms ? ka::rms_norm_bwd_reference(in.grad_out, input, in.weight, lo.rstd, in.grad_residual)
          : ka::layer_norm_bwd_reference(in.grad_out, input, in.weight, lo.mean, lo.rstd, bias, in.grad_residual);
  // grad_input is rstd x (dy w minus its projections): its rounding grows with rstd |dy w|, which
  // at hidden 1 (x - mean = 0, rstd = 1/sqrt(eps)) is large while the true gradient is zero.
  const double grad_input_scale =
      (in.grad_out.to(at::kFloat).abs().max() * in.weight.to(at::kFloat).abs().max() * k.rstd.max()).item<double>();
  expect_within_reference_error(kg.grad_input, lg.grad_input, t.grad_input, what + " grad_input", grad_input_scale);
  expect_within_reference_error(kg.grad_weight, lg.grad_weight, t.grad_weight, what + " grad_weight");
  if (bias) {
    expect_within_reference_error(kg.grad_bias, lg.grad_bias, t.grad_bias, what + " grad_bias");
  } else {
    EXPECT_FALSE(kg.grad_bias.defined()) << what;
  }
}

std::vector<int64_t> hiddens() {
  std::vector<int64_t> h = megatron::testing::tail_sizes();
  h.push_back(16384);
  return h;
}

void sweep(bool rms, bool residual, bool bias) {
  for (const at::ScalarType dtype : megatron::testing::kernel_dtypes()) {
    for (const int64_t hidden : hiddens()) {
      for (const int64_t rows : {int64_t{1}, int64_t{37}, int64_t{1031}}) {
        check_norm(rms, rows, hidden, dtype, residual, bias);
      }
    }
  }
}

}  // namespace

TEST(NormKernels, LayerNormMatchesFp32Reference) {
  MEGATRON_REQUIRE_GPU();
  sweep(false, false, true);
}

TEST(NormKernels, LayerNormWithResidualMatchesFp32Reference) {
  MEGATRON_REQUIRE_GPU();
  sweep(false, true, true);
}

TEST(NormKernels, LayerNormWithoutBiasMatchesFp32Reference) {
  MEGATRON_REQUIRE_GPU();
  for (const at::ScalarType dtype : megatron::testing::kernel_dtypes()) {
    check_norm(false, 37, 1025, dtype, false, false);
    check_norm(false, 37, 4096, dtype, true, false);
  }
}

TEST(NormKernels, RmsNormMatchesFp32Reference) {
  MEGATRON_REQUIRE_GPU();
  sweep(true, false, false);
}

TEST(NormKernels, RmsNormWithResidualMatchesFp32Reference) {
  MEGATRON_REQUIRE_GPU();
  sweep(true, true, false);
}

// Many rows per backward block: the per-block weight partials and their second-stage sum.
TEST(NormKernels, WeightGradsOverManyRows) {
  MEGATRON_REQUIRE_GPU();
  for (const at::ScalarType dtype : megatron::testing::kernel_dtypes()) {
    check_norm(false, 8195, 1024, dtype, false, true);
    check_norm(true, 8195, 4096, dtype, true, false);
  }
}

// A tensor whose data starts one element past a 16-byte boundary takes the scalar path.
TEST(NormKernels, MisalignedStorageUsesScalarPath) {
  MEGATRON_REQUIRE_GPU();
  for (const at::ScalarType dtype : megatron::testing::kernel_dtypes()) {
    Inputs in = make_inputs(19, 1024, dtype, at::kCUDA, true, true);
    at::Tensor shifted = at::empty({19 * 1024 + 1}, in.x.options()).narrow(0, 1, 19 * 1024).view({19, 1024});
    shifted.copy_(in.x);
    in.x = shifted;
    check_norm(false, 19, 1024, dtype, true, true, &in);
    check_norm(true, 19, 1024, dtype, true, false, &in);
  }
}

// Past the shared-memory limit the entries fall back to the reference and still agree.
TEST(NormKernels, HiddenBeyondSharedMemoryFallsBack) {
  MEGATRON_REQUIRE_GPU();
  check_norm(false, 3, 1 << 16, at::kFloat, true, true);
  check_norm(true, 3, 1 << 16, at::kFloat, false, false);
}

TEST(NormKernels, LeadingDimsAreFlattenedIntoRows) {
  MEGATRON_REQUIRE_GPU();
  const auto opts = at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA);
  const at::Tensor x = at::randn({5, 3, 256}, opts);
  const at::Tensor w = at::randn({256}, opts);
  const ka::NormOutputs k = ka::layer_norm_fwd(x, w, at::Tensor(), kEps);
  EXPECT_EQ(k.out.sizes(), x.sizes());
  EXPECT_EQ(k.rstd.sizes(), at::IntArrayRef({15}));
  const ka::NormOutputs flat = ka::layer_norm_fwd(x.reshape({15, 256}), w, at::Tensor(), kEps);
  EXPECT_TRUE(at::equal(k.out.reshape({15, 256}), flat.out));
}

TEST(NormKernels, RejectsMismatchedWeight) {
  MEGATRON_REQUIRE_GPU();
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA);
  const at::Tensor x = at::randn({4, 64}, opts);
  try {
    ka::layer_norm_fwd(x, at::ones({63}, opts), at::Tensor(), kEps);
    FAIL() << "expected megatron::Error";
  } catch (const megatron::Error& e) {
    EXPECT_NE(std::string(e.what()).find("weight has shape"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ka::rms_norm_fwd(x, at::ones({64}, opts.dtype(at::kHalf)), kEps), megatron::Error);
  EXPECT_THROW(ka::rms_norm_fwd(x.t(), at::ones({4}, opts), kEps), megatron::Error);
}

// ---- No GPU needed from here: the references against independent formulas. ----

TEST(NormReference, LayerNormMatchesAtenNativeLayerNorm) {
  at::manual_seed(1);
  for (const bool residual : {false, true}) {
    const Inputs in = make_inputs(13, 97, at::kFloat, at::kCPU, residual, true);
    const at::Tensor s = residual ? in.x + in.residual : in.x;
    const auto [out, mean, rstd] = at::native_layer_norm(s, {97}, in.weight, in.bias, kEps);
    const ka::NormOutputs r = ka::layer_norm_reference(in.x, in.weight, in.bias, kEps, in.residual);
    expect_close(r.out, out, Tolerance::elementwise(1e-5, 1e-5), "r.out");
    expect_close(r.mean, mean.flatten(), Tolerance::elementwise(1e-6, 1e-5), "r.mean");
    expect_close(r.rstd, rstd.flatten(), Tolerance::elementwise(1e-6, 1e-5), "r.rstd");
    if (residual) {
      EXPECT_TRUE(at::equal(r.residual_out, s));
    }
  }
}

TEST(NormReference, LayerNormBackwardMatchesAutograd) {
  at::manual_seed(2);
  for (const bool residual : {false, true}) {
    for (const bool bias : {false, true}) {
      const Inputs in = make_inputs(11, 130, at::kFloat, at::kCPU, residual, bias);
      const Truth t = truth(false, in);
      const ka::NormOutputs f = ka::layer_norm_reference(in.x, in.weight, in.bias, kEps, in.residual);
      const at::Tensor& input = residual ? f.residual_out : in.x;
      const ka::NormGrads g =
          ka::layer_norm_bwd_reference(in.grad_out, input, in.weight, f.mean, f.rstd, bias, in.grad_residual);
      expect_close(g.grad_input, t.grad_input, Tolerance::elementwise(1e-5, 1e-4), "g.grad_input");
      expect_close(g.grad_weight, t.grad_weight, Tolerance::elementwise(1e-4, 1e-4), "g.grad_weight");
      if (bias) {
        expect_close(g.grad_bias, t.grad_bias, Tolerance::elementwise(1e-4, 1e-4), "g.grad_bias");
      }
      EXPECT_EQ(g.grad_bias.defined(), bias);
    }
  }
}

TEST(NormReference, RmsNormMatchesFormulaInDouble) {
  at::manual_seed(3);
  for (const bool residual : {false, true}) {
    const Inputs in = make_inputs(9, 257, at::kFloat, at::kCPU, residual, false);
    const at::Tensor s = (residual ? in.x + in.residual : in.x).to(at::kDouble);
    const at::Tensor ms = s.square().mean({-1}, true);
    const at::Tensor expected = s / at::sqrt(ms + kEps) * in.weight.to(at::kDouble);
    const ka::NormOutputs r = ka::rms_norm_reference(in.x, in.weight, kEps, in.residual);
    expect_close(r.out.to(at::kDouble), expected, Tolerance::elementwise(1e-5, 1e-5), "r.out");
    expect_close(r.rstd.to(at::kDouble), (1.0 / at::sqrt(ms + kEps)).flatten(), Tolerance::elementwise(1e-6, 1e-5), "r.rstd");
    EXPECT_FALSE(r.mean.defined());
  }
}

TEST(NormReference, RmsNormBackwardMatchesAutograd) {
  at::manual_seed(4);
  for (const bool residual : {false, true}) {
    const Inputs in = make_inputs(7, 200, at::kFloat, at::kCPU, residual, false);
    const Truth t = truth(true, in);
    const ka::NormOutputs f = ka::rms_norm_reference(in.x, in.weight, kEps, in.residual);
    const at::Tensor& input = residual ? f.residual_out : in.x;
    const ka::NormGrads g = ka::rms_norm_bwd_reference(in.grad_out, input, in.weight, f.rstd, in.grad_residual);
    expect_close(g.grad_input, t.grad_input, Tolerance::elementwise(1e-5, 1e-4), "g.grad_input");
    expect_close(g.grad_weight, t.grad_weight, Tolerance::elementwise(1e-4, 1e-4), "g.grad_weight");
  }
}

TEST(NormReference, LowPrecisionReferenceRoundsTheFp32Result) {
  at::manual_seed(5);
  const Inputs in = make_inputs(6, 100, at::kBFloat16, at::kCPU, true, true);
  const ka::NormOutputs r = ka::layer_norm_reference(in.x, in.weight, in.bias, kEps, in.residual);
  ASSERT_EQ(r.out.scalar_type(), at::kBFloat16);
  ASSERT_EQ(r.rstd.scalar_type(), at::kFloat);
  const at::Tensor s = (in.x + in.residual).to(at::kFloat);
  const at::Tensor expected = at::layer_norm(s, {100}, in.weight.to(at::kFloat), in.bias.to(at::kFloat), kEps);
  expect_close(r.out.to(at::kFloat), expected, Tolerance::elementwise(1e-2, 1e-2), "r.out");
}

// fp32 LayerNorm on CPU takes ATen's fused native_layer_norm; it must give what the reference
// and autograd give, with and without residual and bias. RMSNorm and other dtypes run the
// reference itself.
TEST(NormCpuEntries, LayerNormMatchesReferenceAndAutograd) {
  at::manual_seed(6);
  for (const bool residual : {false, true}) {
    for (const bool bias : {false, true}) {
      const Inputs in = make_inputs(3 * 7, 130, at::kFloat, at::kCPU, residual, bias);
      const Truth t = truth(false, in);
      const ka::NormOutputs f = ka::layer_norm_fwd(in.x, in.weight, in.bias, kEps, in.residual);
      const ka::NormOutputs r = ka::layer_norm_reference(in.x, in.weight, in.bias, kEps, in.residual);
      expect_close(f.out, r.out, Tolerance::elementwise(1e-5, 1e-5), "f.out");
      expect_close(f.mean, r.mean, Tolerance::elementwise(1e-6, 1e-5), "f.mean");
      expect_close(f.rstd, r.rstd, Tolerance::elementwise(1e-6, 1e-5), "f.rstd");
      EXPECT_EQ(f.mean.sizes(), r.mean.sizes());
      EXPECT_EQ(f.residual_out.defined(), residual);
      if (residual) {
        EXPECT_TRUE(at::equal(f.residual_out, r.residual_out));
      }
      const ka::NormGrads g = ka::layer_norm_bwd(in.grad_out, residual ? f.residual_out : in.x, in.weight, f.mean,
                                                 f.rstd, bias, in.grad_residual);
      expect_close(g.grad_input, t.grad_input, Tolerance::elementwise(1e-5, 1e-4), "g.grad_input");
      expect_close(g.grad_weight, t.grad_weight, Tolerance::elementwise(1e-4, 1e-4), "g.grad_weight");
      EXPECT_EQ(g.grad_bias.defined(), bias);
      if (bias) {
        expect_close(g.grad_bias, t.grad_bias, Tolerance::elementwise(1e-4, 1e-4), "g.grad_bias");
      }
    }
  }
  const at::Tensor x = at::randn({2, 8}), w = at::randn({8});
  EXPECT_TRUE(at::equal(ka::rms_norm_fwd(x, w, kEps, x).out, ka::rms_norm_reference(x, w, kEps, x).out));
}
