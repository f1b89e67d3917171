// Cross entropy from logits: the CUDA kernels against the ATen reference and autograd through
// fp32 over odd and tail vocabularies, every dtype, ignored rows, strided logits, and the
// vocab-parallel pack / all-reduce-sum / combine path over 2-4 shards (GPU, skipped without one);
// the references and the CPU entries (ATen's fused row kernels) against at::log_softmax +
// nll_loss and the shard combine arithmetic (CPU).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "megatron/core/check.h"
#include "megatron/kernels/aten/cross_entropy_ops.h"
#include "tensor_expect.h"

namespace megatron::kernels {
namespace {

using megatron::testing::expect_within_reference_error;
using megatron::testing::expect_close;
using megatron::testing::Tolerance;

at::Tensor make_target(int64_t rows, int64_t vocab, const at::TensorOptions& opts) {
  at::Tensor target = at::randint(0, vocab, {rows}, opts.dtype(at::kLong));
  // Every fifth row ignored; the last row targets the last id (a shard edge).
  target.slice(0, 0, rows, 5).fill_(kCrossEntropyIgnoreIndex);
  target[rows - 1] = vocab - 1;
  return target;
}

// Independent fp32 truth: at::log_softmax + at::nll_loss per row, autograd for the gradient.
std::pair<at::Tensor, at::Tensor> autograd_reference(const at::Tensor& logits, const at::Tensor& target,
                                                     const at::Tensor& grad_loss) {
  const at::Tensor leaf = logits.to(at::kFloat).detach().requires_grad_(true);
  // nll_loss takes [rows, V]: leading dims ([s, b, V]) are flattened and the loss shaped back.
  const at::Tensor loss = at::nll_loss(at::log_softmax(leaf, -1).reshape({-1, leaf.size(-1)}), target.reshape(-1), {},
                                       at::Reduction::None, kCrossEntropyIgnoreIndex)
                              .view(target.sizes());
  loss.backward(grad_loss);
  return {loss.detach(), leaf.grad()};
}

// Splits [0, vocab) at `cuts`, runs stats per shard, packs each as rank r, sums the packs (what
// the all-reduce does) and combines.
CrossEntropyResult sharded_forward(const at::Tensor& logits, const at::Tensor& target, const std::vector<int64_t>& cuts,
                                   bool use_reference) {
  const int64_t tp = static_cast<int64_t>(cuts.size()) - 1;
  at::Tensor packed;
  for (int64_t r = 0; r < tp; ++r) {
    const at::Tensor shard = logits.narrow(1, cuts[r], cuts[r + 1] - cuts[r]);
    const CrossEntropyStats s = use_reference ? cross_entropy_shard_stats_reference(shard, target, cuts[r])
                                              : cross_entropy_shard_stats(shard, target, cuts[r]);
    const at::Tensor p = cross_entropy_pack_stats(s, r, tp);
    EXPECT_EQ(p.count_nonzero().item<int64_t>() <= 3 * target.numel(), true);
    packed = r == 0 ? p : packed + p;
  }
  return cross_entropy_combine_packed(packed, target, tp);
}

TEST(CrossEntropyReference, MatchesLogSoftmaxNllAndAutogradOnCpu) {
  at::manual_seed(0);
  for (int64_t vocab : {1, 7, 97, 1025}) {
    const at::Tensor logits = at::randn({13, vocab}) * 4;
    const at::Tensor target = make_target(13, vocab, at::TensorOptions());
    const at::Tensor grad_loss = at::randn({13});
    const auto [loss_ref, grad_ref] = autograd_reference(logits, target, grad_loss);
    const CrossEntropyResult r = cross_entropy_forward_reference(logits, target);
    expect_close(r.loss, loss_ref, Tolerance::elementwise(1e-5, 1e-5), str_cat(vocab));
    const at::Tensor grad = cross_entropy_backward_reference(grad_loss, logits, target, r.max, r.sum_exp);
    expect_close(grad, grad_ref, Tolerance::elementwise(1e-6, 1e-5), str_cat(vocab));
  }
}

// The CPU entries take ATen's fused row kernels: the same values as the reference to fp32
// rounding, for signed weights (multiplied) and non-negative ones with zeros (folded into the
// exponent), whole and over shards.
TEST(CrossEntropyAtenPath, MatchesAutogradTruthOnCpu) {
  at::manual_seed(4);
  for (int64_t vocab : {1, 7, 97, 1025, 50304}) {
    const at::Tensor logits = at::randn({3, 11, vocab}) * 4;
    const at::Tensor target = make_target(33, vocab, at::TensorOptions()).view({3, 11});
    at::Tensor masked_mean = at::full({3, 11}, 1.0 / 33);
    masked_mean.select(1, 2).zero_();  // a loss mask
    for (const at::Tensor& grad_loss : {at::randn({3, 11}), masked_mean}) {
      const auto [loss_ref, grad_ref] = autograd_reference(logits.view({33, vocab}), target.view({33}),
                                                           grad_loss.reshape({33}));
      const CrossEntropyResult r = cross_entropy_forward(logits, target);
      ASSERT_EQ(r.loss.sizes(), target.sizes());
      expect_close(r.loss.view({33}), loss_ref, Tolerance::elementwise(1e-5, 1e-5), str_cat(vocab));
      const CrossEntropyResult ref = cross_entropy_forward_reference(logits, target);
      EXPECT_TRUE(at::equal(r.max, ref.max)) << vocab;
      expect_close(r.sum_exp, ref.sum_exp, Tolerance::elementwise(1e-6, 1e-5), str_cat(vocab));
      const at::Tensor grad = cross_entropy_backward(grad_loss, logits, target, r.max, r.sum_exp);
      ASSERT_EQ(grad.sizes(), logits.sizes());
      expect_close(grad.view({33, vocab}), grad_ref, Tolerance::elementwise(1e-6, 1e-5), str_cat(vocab));
      if (grad_loss.select(1, 2).abs().max().item<float>() == 0.0f) {
        EXPECT_EQ(grad.select(1, 2).abs().max().item<float>(), 0.0f) << "a masked row has no gradient, V=" << vocab;
      }
    }
  }
  // Two shards through the pack/combine, each backward on its own slice.
  const at::Tensor logits = at::randn({24, 1000}) * 5;
  const at::Tensor target = make_target(24, 1000, at::TensorOptions());
  const at::Tensor grad_loss = at::rand({24});
  const auto [loss_ref, grad_ref] = autograd_reference(logits, target, grad_loss);
  const CrossEntropyResult r = sharded_forward(logits, target, {0, 400, 1000}, /*use_reference=*/false);
  expect_close(r.loss, loss_ref, Tolerance::elementwise(1e-5, 1e-5), "r.loss");
  const at::Tensor grad = at::cat({cross_entropy_backward(grad_loss, logits.narrow(1, 0, 400), target, r.max, r.sum_exp, 0),
                                   cross_entropy_backward(grad_loss, logits.narrow(1, 400, 600), target, r.max, r.sum_exp, 400)},
                                  1);
  expect_close(grad, grad_ref, Tolerance::elementwise(1e-6, 1e-5), "grad");
}

TEST(CrossEntropyReference, ShardCombineEqualsUnshardedOnCpu) {
  at::manual_seed(1);
  const at::Tensor logits = at::randn({4, 6, 1000}) * 5;  // [s, b, vocab]
  const at::Tensor target = make_target(24, 1000, at::TensorOptions()).view({4, 6});
  const at::Tensor flat = logits.view({24, 1000});
  const CrossEntropyResult whole = cross_entropy_forward_reference(logits, target);
  for (const std::vector<int64_t>& cuts : std::vector<std::vector<int64_t>>{
           {0, 500, 1000}, {0, 1, 999, 1000}, {0, 250, 500, 750, 1000}, {0, 1000}}) {
    const CrossEntropyResult r = sharded_forward(flat, target.view({24}), cuts, /*use_reference=*/true);
    expect_close(r.loss, whole.loss.view({24}), Tolerance::elementwise(1e-5, 1e-5), str_cat(cuts.size() - 1, " shards"));
    expect_close(r.max, whole.max.view({24}), Tolerance::elementwise(1e-8, 1e-5), str_cat(cuts.size() - 1, " shards"));
    expect_close(r.sum_exp, whole.sum_exp.view({24}), Tolerance::elementwise(1e-6, 1e-5), str_cat(cuts.size() - 1, " shards"));
  }
  // A shard of -inf logits contributes nothing (no nan from exp(-inf - -inf)).
  at::Tensor masked = flat.clone();
  masked.narrow(1, 500, 500).fill_(-std::numeric_limits<float>::infinity());
  const at::Tensor t = at::randint(0, 500, {24}, at::kLong);
  const CrossEntropyResult r = sharded_forward(masked, t, {0, 500, 1000}, true);
  expect_close(r.loss, cross_entropy_forward_reference(masked.narrow(1, 0, 500), t).loss, Tolerance::elementwise(1e-5, 1e-5), "r.loss");
}

TEST(CrossEntropyReference, RejectsMismatchedTarget) {
  EXPECT_THROW(cross_entropy_forward(at::randn({4, 10}), at::zeros({5}, at::kLong)), megatron::Error);
  EXPECT_THROW(cross_entropy_forward(at::randn({4, 10}), at::zeros({4})), megatron::Error);  // float ids
  EXPECT_THROW(cross_entropy_pack_stats({at::zeros({2}), at::zeros({2}), at::zeros({2})}, 2, 2), megatron::Error);
}

void check_unsharded(const at::Tensor& logits, const at::Tensor& target, const std::string& what) {
  const at::Tensor grad_loss = at::randn(target.sizes(), logits.options().dtype(at::kFloat));
  const auto [loss_hi, grad_hi] = autograd_reference(logits, target, grad_loss);
  const CrossEntropyResult r = cross_entropy_forward(logits, target);
  const CrossEntropyResult ref = cross_entropy_forward_reference(logits, target);
  expect_within_reference_error(r.loss, ref.loss, loss_hi, "loss " + what);
  expect_close(r.max, ref.max, Tolerance::elementwise(1e-8, 1e-5), what);
  expect_close(r.sum_exp, ref.sum_exp, Tolerance::elementwise(1e-6, 1e-5), what);
  const at::Tensor ignored = target == kCrossEntropyIgnoreIndex;
  EXPECT_EQ(r.loss.masked_select(ignored).abs().sum().item<double>(), 0.0) << what;
  const at::Tensor grad = cross_entropy_backward(grad_loss, logits, target, r.max, r.sum_exp);
  ASSERT_EQ(grad.scalar_type(), logits.scalar_type());
  expect_within_reference_error(
      grad, cross_entropy_backward_reference(grad_loss, logits, target, ref.max, ref.sum_exp), grad_hi, "grad " + what);
  EXPECT_EQ(grad.to(at::kFloat).index({ignored}).abs().sum().item<double>(), 0.0) << what;
}

TEST(CrossEntropyKernel, MatchesReferenceOverVocabSizesAndDtypes) {
  MEGATRON_REQUIRE_GPU();
  at::manual_seed(2);
  const auto cuda = at::TensorOptions().device(at::kCUDA);
  for (at::ScalarType dtype : megatron::testing::kernel_dtypes()) {
    for (int64_t vocab : {1, 7, 97, 128, 1025, 4097, 8192, 50304}) {
      const at::Tensor logits = (at::randn({37, vocab}, cuda) * 3).to(dtype);
      check_unsharded(logits, make_target(37, vocab, cuda), std::string(c10::toString(dtype)) + " V=" +
                                                                std::to_string(vocab));
    }
    const at::Tensor big = (at::randn({9, 128256}, cuda) * 3).to(dtype);
    check_unsharded(big, make_target(9, 128256, cuda), std::string(c10::toString(dtype)) + " V=128256");
    // Strided rows (a narrowed [rows, 1040] buffer) and [s, b, V] leading dims.
    const at::Tensor wide = (at::randn({21, 1040}, cuda) * 3).to(dtype);
    check_unsharded(wide.narrow(1, 0, 1032), make_target(21, 1032, cuda), std::string(c10::toString(dtype)) + " strided");
    const at::Tensor sbv = (at::randn({5, 3, 1000}, cuda) * 3).to(dtype);
    check_unsharded(sbv, make_target(15, 1000, cuda).view({5, 3}), std::string(c10::toString(dtype)) + " [s,b,V]");
  }
}

TEST(CrossEntropyKernel, ShardedPathEqualsUnsharded) {
  MEGATRON_REQUIRE_GPU();
  at::manual_seed(3);
  const auto cuda = at::TensorOptions().device(at::kCUDA);
  for (at::ScalarType dtype : megatron::testing::kernel_dtypes()) {
    for (int64_t vocab : {50304, 128256}) {
      const at::Tensor logits = (at::randn({19, vocab}, cuda) * 3).to(dtype);
      const at::Tensor target = make_target(19, vocab, cuda);
      const CrossEntropyResult whole = cross_entropy_forward(logits, target);
      const at::Tensor grad_loss = at::randn({19}, cuda);
      const at::Tensor grad_whole = cross_entropy_backward(grad_loss, logits, target, whole.max, whole.sum_exp);
      for (const std::vector<int64_t>& cuts : std::vector<std::vector<int64_t>>{
               {0, vocab / 2, vocab}, {0, 12345, 30001, vocab}, {0, vocab / 4, vocab / 2, 3 * vocab / 4, vocab}}) {
        const std::string what = std::string(c10::toString(dtype)) + " V=" + std::to_string(vocab) + " tp=" +
                                 std::to_string(cuts.size() - 1);
        const CrossEntropyResult r = sharded_forward(logits, target, cuts, /*use_reference=*/false);
        expect_close(r.loss, whole.loss, Tolerance::elementwise(1e-5, 1e-5), what);
        EXPECT_TRUE(at::equal(r.max, whole.max)) << what;
        std::vector<at::Tensor> grads;
        for (size_t i = 0; i + 1 < cuts.size(); ++i) {
          grads.push_back(cross_entropy_backward(grad_loss, logits.narrow(1, cuts[i], cuts[i + 1] - cuts[i]), target,
                                                 r.max, r.sum_exp, cuts[i]));
        }
        const at::Tensor grad = at::cat(grads, 1);
        // Same formula, global stats agree to fp32 rounding: at most one low-precision ulp apart.
        const double tol = dtype == at::kFloat ? 1e-6 : (dtype == at::kBFloat16 ? 1e-2 : 1e-3);
        expect_close(grad, grad_whole, Tolerance::absolute(tol), what);
      }
    }
  }
}

}  // namespace
}  // namespace megatron::kernels
