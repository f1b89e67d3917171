// One block of attention with its log-sum-exp (attention_block_ops.h), the unit context-parallel
// attention merges: every back end against softmax attention written out in float64 (values,
// log-sum-exp, and the gradients given the block's own output and log-sum-exp; two blocks merged
// by log-sum-exp give the whole row's gradients). Dropout: with values one-hot in the key position
// the output shows the mask itself (every entry 0 or P / (1 - p)); the same generator state draws
// the same mask for other values, and the output and gradients equal the written-out formula with
// that mask. CPU suites run the ATen CPU kernel and the explicit path; the Gpu suite the flash and
// memory-efficient kernels on CUDA tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "megatron/kernels/aten/attention_block_ops.h"
#include "tensor_expect.h"

namespace megatron::kernels::aten {
namespace {

using testing::expect_close;
using testing::Tolerance;

struct Inputs {
  at::Tensor q, k, v, dout;  // float64 masters, [b, h, s, d]
};

Inputs make_inputs(std::int64_t s_q, std::int64_t s_k, std::int64_t d, std::uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  return {at::randn({2, 3, s_q, d}, gen, opts), at::randn({2, 3, s_k, d}, gen, opts),
          at::randn({2, 3, s_k, d}, gen, opts), at::randn({2, 3, s_q, d}, gen, opts)};
}

// softmax(scale q k^T + causal) v in float64 with autograd: (out, lse, dq, dk, dv); `weights`
// multiplies the probabilities when defined (a dropout mask already scaled by 1 / (1 - p)).
struct Reference {
  at::Tensor out, lse, dq, dk, dv;
};
at::Tensor masked_scores(const at::Tensor& q, const at::Tensor& k, bool causal, double scale) {
  const at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) * scale;
  return causal ? scores.masked_fill(at::ones({q.size(2), k.size(2)}, at::kBool).triu(1), -1e300) : scores;
}
Reference reference(const Inputs& in, bool causal, double scale, const at::Tensor& weights = {}) {
  const at::Tensor q = in.q.clone().requires_grad_(), k = in.k.clone().requires_grad_(),
                   v = in.v.clone().requires_grad_();
  const at::Tensor scores = masked_scores(q, k, causal, scale);
  at::Tensor probs = at::softmax(scores, -1);
  if (weights.defined()) probs = probs * weights;
  const at::Tensor out = at::matmul(probs, v);
  out.backward(in.dout);
  return {out.detach(), at::logsumexp(scores, -1).detach(), q.grad(), k.grad(), v.grad()};
}

struct Result {
  AttentionBlock block;
  at::Tensor dq, dk, dv;
};
Result run(const Inputs& in, bool causal, double scale, double p, at::ScalarType dtype, const at::Device& device) {
  const auto to = [&](const at::Tensor& t) { return t.to(device, dtype); };
  Result r{attention_block_forward(to(in.q), to(in.k), to(in.v), causal, scale, p), {}, {}, {}};
  std::tie(r.dq, r.dk, r.dv) = attention_block_backward(to(in.dout), to(in.q), to(in.k), to(in.v), r.block.out,
                                                        r.block.lse, r.block.rng, causal, scale, p);
  return r;
}

// fp32 on a GPU may multiply in TF32 (10 bits), hence its looser bound there.
Tolerance tolerance_of(at::ScalarType t, const at::Device& device) {
  switch (t) {
    case at::kDouble: return Tolerance::of_largest(1e-10, 1e-10);
    case at::kFloat: return device.is_cuda() ? Tolerance::of_largest(2e-3, 2e-3) : Tolerance::of_largest(2e-5, 2e-5);
    default: return Tolerance::of_largest(2e-2, 3e-2);
  }
}

// The inputs as `dtype` holds them, back in float64 (both sides see the same values).
Inputs rounded(const Inputs& in, at::ScalarType dtype) {
  const auto r = [&](const at::Tensor& t) { return t.to(dtype).to(at::kDouble); };
  return {r(in.q), r(in.k), r(in.v), r(in.dout)};
}

void expect_matches(const Result& got, const Reference& want, at::ScalarType dtype, const std::string& what) {
  const Tolerance tol = tolerance_of(dtype, got.block.out.device());
  expect_close(got.block.out, want.out, tol, what + " out");
  expect_close(got.block.lse, want.lse, tol, what + " lse");
  expect_close(got.dq, want.dq, tol, what + " dq");
  expect_close(got.dk, want.dk, tol, what + " dk");
  expect_close(got.dv, want.dv, tol, what + " dv");
}

// Square blocks causal or not, and a rectangular one (context parallelism's half blocks), in
// every dtype the device runs; the back end each runs is named in the failure.
void check_back_ends(const at::Device& device, const std::vector<at::ScalarType>& dtypes) {
  for (const at::ScalarType dtype : dtypes) {
    for (const auto& [s_q, s_k, causal] : {std::tuple<int, int, bool>{37, 37, true}, {37, 37, false}, {16, 40, false},
                                           {40, 16, false}, {128, 128, true}}) {
      const Inputs in = rounded(make_inputs(s_q, s_k, 64, 11), dtype);
      const double scale = 0.125;
      const Result got = run(in, causal, scale, 0.0, dtype, device);
      const std::string what = std::string(attention_block_backend(got.block.out, 0.0)) + " " +
                               c10::toString(dtype) + " " + std::to_string(s_q) + "x" + std::to_string(s_k) +
                               (causal ? " causal" : "");
      ASSERT_EQ(got.block.out.scalar_type(), dtype) << what;
      expect_matches(got, reference(in, causal, scale), dtype, what);
    }
  }
}

TEST(AttentionBlockReference, EveryCpuBackEndMatchesFloat64Attention) {
  check_back_ends(at::kCPU, {at::kDouble, at::kFloat, at::kBFloat16});
  EXPECT_STREQ(attention_block_backend(at::zeros({1, 1, 4, 8}), 0.0), "cpu_flash");
  EXPECT_STREQ(attention_block_backend(at::zeros({1, 1, 4, 8}), 0.1), "explicit");
  EXPECT_STREQ(attention_block_backend(at::zeros({1, 1, 4, 8}, at::kDouble), 0.0), "explicit");
}

// Keys split in two blocks, merged by log-sum-exp; each block's backward given the merged output
// and log-sum-exp: the whole attention's gradients.
void check_merged_blocks(const at::Device& device, at::ScalarType dtype) {
  const Inputs in = rounded(make_inputs(24, 24, 32, 12), dtype);
  const auto to = [&](const at::Tensor& t) { return t.to(device, dtype); };
  const double scale = 0.2;
  const auto keys = [&](const at::Tensor& t, int part) { return to(t.narrow(2, part * 8, part == 0 ? 8 : 16)); };
  const AttentionBlock first = attention_block_forward(to(in.q), keys(in.k, 0), keys(in.v, 0), false, scale);
  const AttentionBlock second = attention_block_forward(to(in.q), keys(in.k, 1), keys(in.v, 1), false, scale);
  const at::Tensor lse = at::logaddexp(first.lse, second.lse);
  const at::ScalarType acc = dtype == at::kDouble ? at::kDouble : at::kFloat;
  const at::Tensor out = (first.out.to(acc) * at::exp(first.lse - lse).unsqueeze(-1) +
                          second.out.to(acc) * at::exp(second.lse - lse).unsqueeze(-1))
                             .to(dtype);
  auto [dq0, dk0, dv0] =
      attention_block_backward(to(in.dout), to(in.q), keys(in.k, 0), keys(in.v, 0), out, lse, first.rng, false, scale);
  auto [dq1, dk1, dv1] =
      attention_block_backward(to(in.dout), to(in.q), keys(in.k, 1), keys(in.v, 1), out, lse, second.rng, false, scale);
  const Reference want = reference(in, false, scale);
  const Tolerance tol = tolerance_of(dtype, device);
  expect_close(out, want.out, tol, "merged out");
  expect_close(lse, want.lse, tol, "merged lse");
  expect_close(dq0.to(at::kDouble) + dq1.to(at::kDouble), want.dq, tol, "dq");
  expect_close(at::cat({dk0, dk1}, 2), want.dk, tol, "dk");
  expect_close(at::cat({dv0, dv1}, 2), want.dv, tol, "dv");
}

TEST(AttentionBlockReference, MergedBlocksGiveTheWholeRowsGradients) {
  for (const at::ScalarType dtype : {at::kDouble, at::kFloat}) {
    SCOPED_TRACE(c10::toString(dtype));
    check_merged_blocks(at::kCPU, dtype);
  }
}

// Dropout on one block: the mask seen through one-hot values, redrawn for other values from the
// same generator state, and the output and gradients of the formula with that mask.
void check_dropout(const at::Device& device, at::ScalarType dtype, bool causal) {
  const std::int64_t s = 48, d = 64;  // d >= s: one-hot values show every key's weight
  const double p = 0.25, scale = 0.125;
  const Inputs in = rounded(make_inputs(s, s, d, 13), dtype);
  at::Generator gen = at::globalContext().defaultGenerator(device);
  gen.set_current_seed(99);
  const at::Tensor start = gen.get_state();
  // Pass 1: v[j] = e_j, so out[i, j] = P_ij * keep_ij / (1 - p).
  Inputs one_hot = in;
  one_hot.v = at::eye(s, d, at::kDouble).expand({2, 3, s, d}).contiguous();
  const Result shown = run(one_hot, causal, scale, p, dtype, device);
  const at::Tensor probs = at::softmax(masked_scores(in.q, in.k, causal, scale), -1);
  const at::Tensor seen = shown.block.out.to(at::kCPU, at::kDouble).narrow(-1, 0, s);
  const at::Tensor kept = seen != 0;
  const double visible = causal ? 2 * 3 * s * (s + 1) / 2.0 : 2 * 3 * s * s;
  const double fraction = kept.sum().item<double>() / visible;
  // 1 - p within 5 standard deviations of a binomial fraction over `visible` draws.
  EXPECT_NEAR(fraction, 1.0 - p, 5 * std::sqrt(p * (1 - p) / visible)) << "kept fraction";
  if (causal) {
    EXPECT_EQ(kept.masked_select(at::ones({s, s}, at::kBool).triu(1)).sum().item<int64_t>(), 0) << "a future key";
  }
  const at::Tensor weights = kept.to(at::kDouble) / (1.0 - p);
  expect_close(seen, probs * weights, tolerance_of(dtype, device), "one-hot output = P * keep / (1 - p)");
  // Pass 2: the same generator state, other values: the same mask. The backward redraws it
  // without touching the default generator.
  gen.set_state(start);
  const auto to = [&](const at::Tensor& t) { return t.to(device, dtype); };
  Result got{attention_block_forward(to(in.q), to(in.k), to(in.v), causal, scale, p), {}, {}, {}};
  const at::Tensor after_forward = gen.get_state();
  std::tie(got.dq, got.dk, got.dv) = attention_block_backward(to(in.dout), to(in.q), to(in.k), to(in.v), got.block.out,
                                                              got.block.lse, got.block.rng, causal, scale, p);
  EXPECT_TRUE(at::equal(gen.get_state(), after_forward)) << "the backward drew from the default generator";
  expect_matches(got, reference(in, causal, scale, weights), dtype,
                 std::string(attention_block_backend(got.block.out, p)) + " dropout");
}

TEST(AttentionBlockReference, DropoutMaskIsRedrawnExactlyByTheBackward) {
  for (const at::ScalarType dtype : {at::kDouble, at::kFloat}) {
    for (const bool causal : {true, false}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + (causal ? " causal" : ""));
      check_dropout(at::kCPU, dtype, causal);
    }
  }
}

TEST(AttentionBlockGpu, FlashAndEfficientMatchFloat64Attention) {
  MEGATRON_REQUIRE_GPU();
  const at::Device cuda(at::kCUDA, 0);
  check_back_ends(cuda, {at::kFloat, at::kBFloat16, at::kHalf});
  EXPECT_STREQ(attention_block_backend(at::zeros({1, 1, 4, 64}, at::TensorOptions(cuda).dtype(at::kBFloat16)), 0.0),
               "flash");
  EXPECT_STREQ(attention_block_backend(at::zeros({1, 1, 4, 64}, cuda), 0.0), "efficient");
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    check_merged_blocks(cuda, dtype);
  }
}

TEST(AttentionBlockGpu, DropoutMaskIsRedrawnExactlyByTheBackward) {
  MEGATRON_REQUIRE_GPU();
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (const bool causal : {true, false}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + (causal ? " causal" : ""));
      check_dropout(at::Device(at::kCUDA, 0), dtype, causal);
    }
  }
}

}  // namespace
}  // namespace megatron::kernels::aten
