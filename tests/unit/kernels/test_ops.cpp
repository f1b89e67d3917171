// The model's fused ops (kernels/ops.h) against the plain-ATen compositions they replace, through
// autograd: outputs and the gradients of every differentiable input, in fp32, bf16 and fp16, on odd
// sizes. On CPU the ops run the kernels' ATen references; the same tests run the CUDA kernels when
// a GPU is visible (the tensors then live there). Tolerances: fp32 1e-5 relative to the values'
// scale; bf16 and fp16 compare against the fp32 composition with the dtype's rounding (2^-8 and
// 2^-11 relative) times a small factor for the few roundings between the ops.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "megatron/kernels/aten/rope_ops.h"
#include "megatron/kernels/device.h"
#include "megatron/kernels/ops.h"
#include "tensor_expect.h"

namespace megatron::kernels {
namespace {

at::Device device() { return cuda_usable() ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU); }

// |a - b| <= tol * (1 + max|b|): tol absolute plus tol relative to the reference's largest value.
testing::Tolerance tolerance(at::ScalarType t) {
  const double tol = t == at::kFloat ? 1e-5 : (t == at::kBFloat16 ? 3e-2 : 4e-3);
  return testing::Tolerance::of_largest(tol, tol);
}

const std::vector<at::ScalarType> kDtypes = {at::kFloat, at::kBFloat16, at::kHalf};

// Runs `fused` on low-precision copies of `inputs` and `reference` on fp32 copies, backpropagates
// the same random output gradient through both, and compares outputs and input gradients.
void check_op(const std::string& name, const std::vector<at::Tensor>& inputs,
              const std::function<at::Tensor(const std::vector<at::Tensor>&)>& fused,
              const std::function<at::Tensor(const std::vector<at::Tensor>&)>& reference) {
  for (const at::ScalarType dtype : kDtypes) {
    SCOPED_TRACE(name + " in " + std::string(c10::toString(dtype)));
    std::vector<at::Tensor> low, high;
    for (const at::Tensor& t : inputs) {
      const at::Tensor rounded = t.to(dtype).to(at::kFloat);  // both sides see the same values
      low.push_back(rounded.to(device(), dtype).detach().requires_grad_(true));
      high.push_back(rounded.to(device()).detach().requires_grad_(true));
    }
    const at::Tensor out = fused(low);
    const at::Tensor want = reference(high);
    ASSERT_EQ(out.scalar_type(), dtype);
    const at::Tensor grad = at::randn(want.sizes(), at::TensorOptions().device(device())) * 0.5;
    out.backward(grad.to(dtype));
    want.backward(grad);
    const testing::Tolerance tol = tolerance(dtype);
    testing::expect_close(out, want, tol, "output");
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      testing::expect_close(low[i].grad(), high[i].grad(), tol, "gradient of input " + std::to_string(i));
    }
  }
}

TEST(FusedOps, LayerNormMatchesAtenLayerNorm) {
  for (const int64_t h : {7, 64, 97}) {
    check_op("layer_norm", {at::randn({3, 5, h}), at::randn({h}), at::randn({h})},
             [](const auto& v) { return ops::layer_norm(v[0], v[1], v[2], 1e-5); },
             [](const auto& v) { return at::layer_norm(v[0], {v[0].size(-1)}, v[1], v[2], 1e-5); });
  }
}

TEST(FusedOps, RmsNormMatchesItsFormula) {
  for (const int64_t h : {5, 128}) {
    check_op("rms_norm", {at::randn({4, 3, h}) * 3, at::randn({h})},
             [](const auto& v) { return ops::rms_norm(v[0], v[1], 1e-6); },
             [](const auto& v) { return v[0] * at::rsqrt(v[0].square().mean(-1, true) + 1e-6) * v[1]; });
  }
}

TEST(FusedOps, NormsWithResidualReturnTheSumAndItsNorm) {
  // Both outputs used: the gradient reaching the sum through its other use must flow too.
  check_op("layer_norm_residual", {at::randn({6, 33}), at::randn({6, 33}), at::randn({33}), at::randn({33})},
           [](const auto& v) {
             const auto [y, sum] = ops::layer_norm_residual(v[0], v[1], v[2], v[3], 1e-5);
             return y * 2 + sum;
           },
           [](const auto& v) {
             const at::Tensor sum = v[0] + v[1];
             return at::layer_norm(sum, {33}, v[2], v[3], 1e-5) * 2 + sum;
           });
  check_op("rms_norm_residual", {at::randn({6, 33}), at::randn({6, 33}), at::randn({33})},
           [](const auto& v) {
             const auto [y, sum] = ops::rms_norm_residual(v[0], v[1], v[2], 1e-5);
             return y + sum * 3;
           },
           [](const auto& v) {
             const at::Tensor sum = v[0] + v[1];
             return sum * at::rsqrt(sum.square().mean(-1, true) + 1e-5) * v[2] + sum * 3;
           });
}

TEST(FusedOps, BiasGeluIsTheTanhApproximation) {
  check_op("bias_gelu", {at::randn({9, 47}) * 2, at::randn({47})},
           [](const auto& v) { return ops::bias_gelu(v[0], v[1]); },
           [](const auto& v) { return at::gelu(v[0] + v[1], "tanh"); });
}

TEST(FusedOps, BiasSwigluIsSiluOfTheFirstHalfTimesTheSecond) {
  check_op("bias_swiglu", {at::randn({5, 3, 2 * 13}), at::randn({2 * 13})},
           [](const auto& v) { return ops::bias_swiglu(v[0], v[1]); },
           [](const auto& v) {
             const auto halves = (v[0] + v[1]).chunk(2, -1);
             return at::silu(halves[0]) * halves[1];
           });
}

// Rotation written independently of the kernels: complex multiplication of channel pairs.
at::Tensor rotate_reference(const at::Tensor& t, int64_t rot_dim, double base) {
  const int64_t s = t.size(0), half = rot_dim / 2;
  const at::Tensor inv = at::pow(base, -at::arange(0, half, at::kDouble) * 2.0 / static_cast<double>(rot_dim));
  const at::Tensor angles = at::outer(at::arange(s, at::kDouble), inv).to(at::kFloat).to(t.device());  // [s, half]
  const at::Tensor cos = angles.cos().view({s, 1, 1, half}), sin = angles.sin().view({s, 1, 1, half});
  const at::Tensor x1 = t.narrow(-1, 0, half), x2 = t.narrow(-1, half, half);  // non-interleaved halves
  return at::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin, t.narrow(-1, rot_dim, t.size(-1) - rot_dim)}, -1);
}

TEST(FusedOps, RopeRotatesHalvesAndPassesTheRestThrough) {
  for (const int64_t rot_dim : {8, 12}) {  // whole head (hn 12) and a partial rotation
    check_op("rope", {at::randn({7, 2, 3, 12})},
             [rot_dim](const auto& v) {
               return ops::rope(v[0], rope_freqs(7, rot_dim, 10000.0, false, v[0].device()), false);
             },
             [rot_dim](const auto& v) { return rotate_reference(v[0], rot_dim, 10000.0); });
  }
}

TEST(FusedOps, CausalSoftmaxMasksTheFuture) {
  for (const int64_t s : {1, 5, 33}) {
    check_op("causal_softmax", {at::randn({6, s, s}) * 3},
             [](const auto& v) { return ops::causal_softmax(v[0], 0.7); },
             [s](const auto& v) {
               const at::Tensor future = at::ones({s, s}, v[0].options().dtype(at::kBool)).triu(1);
               return at::softmax((v[0] * 0.7).masked_fill(future, -INFINITY), -1);
             });
  }
}

TEST(FusedOps, CrossEntropyMatchesLogSoftmaxNll) {
  for (const int64_t vocab : {3, 101, 1000}) {
    const at::Tensor target = at::randint(vocab, {4, 5}, at::kLong).to(device());
    check_op("cross_entropy", {at::randn({4, 5, vocab}) * 2},
             [target](const auto& v) { return ops::cross_entropy(v[0], target).to(v[0].scalar_type()); },
             [target](const auto& v) {
               return -at::log_softmax(v[0].to(at::kFloat), -1).gather(-1, target.unsqueeze(-1)).squeeze(-1);
             });
  }
}

// The products, through the same check in every dtype; in fp16 on the CPU they are fp32 products
// rounded once, so there the output is also the fp64 product of the same inputs rounded to fp16
// (to one fp16 rounding: fp32 and fp64 sums can round to neighbouring halves).
TEST(FusedOps, LinearMatmulAndGroupedMmAreAtensProducts) {
  const at::Tensor x = at::randn({3, 5, 24}), w = at::randn({40, 24}) * 0.3, b = at::randn({40});
  check_op("linear", {x, w, b}, [](const auto& v) { return ops::linear(v[0], v[1], v[2]); },
           [](const auto& v) { return at::linear(v[0], v[1], v[2]); });
  check_op("linear without bias", {x, w}, [](const auto& v) { return ops::linear(v[0], v[1]); },
           [](const auto& v) { return at::linear(v[0], v[1]); });
  check_op("batched matmul", {at::randn({2, 3, 7, 16}), at::randn({2, 3, 16, 9})},
           [](const auto& v) { return ops::matmul(v[0], v[1]); }, [](const auto& v) { return at::matmul(v[0], v[1]); });
  // Three groups of rows (5, 0 and 7) against their own [16, 24] matrices.
  const at::Tensor offsets = at::tensor({5, 5, 12}, at::kInt).to(device());
  check_op("grouped_mm", {at::randn({12, 16}), at::randn({3, 16, 24}) * 0.3},
           [offsets](const auto& v) { return ops::grouped_mm(v[0], v[1], offsets); },
           [](const auto& v) {
             return at::cat({at::matmul(v[0].narrow(0, 0, 5), v[1][0]), at::matmul(v[0].narrow(0, 5, 7), v[1][2])});
           });
  const at::Tensor xh = x.to(at::kHalf), wh = w.to(at::kHalf);
  const at::Tensor ours = ops::linear(xh, wh).to(at::kFloat);
  const at::Tensor exact = at::linear(xh.to(at::kDouble), wh.to(at::kDouble)).to(at::kHalf).to(at::kFloat);
  testing::expect_close(ours, exact, testing::Tolerance::of_largest(0.0, std::ldexp(1.0, -11)), "fp16 linear");
  EXPECT_GT(ours.eq(exact).to(at::kFloat).mean().item<double>(), 0.99);  // one rounding: nearly all equal
}

}  // namespace
}  // namespace megatron::kernels
