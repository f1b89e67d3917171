// Multi-tensor AdamW: the ATen reference against an independent double-precision loop (CPU), the
// entry's validation (CPU), and the fused kernel against the reference over odd, tail, misaligned
// and multi-launch tensor lists in every grad and copy dtype, with grad_scale and found_inf (GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "megatron/core/check.h"
#include "megatron/kernels/aten/adamw_ops.h"
#include "tensor_expect.h"
#if MEGATRON_CUDA_KERNELS
#include "megatron/kernels/multi_tensor_adamw.h"
#endif

namespace {

using megatron::kernels::AdamWHyperparams;
using megatron::kernels::aten::AdamWLists;

// Fresh lists with params ~ N(0,1), zero moments, grads ~ N(0,1) in grad_type, copies in copy_type
// (undefined type: no copies). Every third tensor has no weight decay.
AdamWLists make_lists(const std::vector<int64_t>& sizes, at::Device device, at::ScalarType grad_type,
                      std::optional<at::ScalarType> copy_type) {
  AdamWLists l;
  const auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    l.params.push_back(at::randn({sizes[i]}, f32));
    l.grads.push_back(at::randn({sizes[i]}, f32).to(grad_type));
    l.exp_avgs.push_back(at::zeros({sizes[i]}, f32));
    l.exp_avg_sqs.push_back(at::zeros({sizes[i]}, f32));
    if (copy_type) l.param_copies.push_back(l.params.back().to(*copy_type));  // the model copy mirrors the params
    l.decays.push_back(i % 3 != 2);
  }
  return l;
}

AdamWLists clone_lists(const AdamWLists& l) {
  AdamWLists c;
  for (const auto& t : l.params) c.params.push_back(t.clone());
  for (const auto& t : l.grads) c.grads.push_back(t.clone());
  for (const auto& t : l.exp_avgs) c.exp_avgs.push_back(t.clone());
  for (const auto& t : l.exp_avg_sqs) c.exp_avg_sqs.push_back(t.clone());
  for (const auto& t : l.param_copies) c.param_copies.push_back(t.defined() ? t.clone() : t);
  c.decays = l.decays;
  return c;
}

void refill_grads(AdamWLists& l, double magnitude) {
  for (auto& g : l.grads) g.copy_(at::randn(g.sizes(), g.options().dtype(at::kFloat)) * magnitude);
}

using megatron::testing::expect_close;
using megatron::testing::expect_equal;
using megatron::testing::Tolerance;

template <typename Fn>
void expect_error_mentions(Fn&& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected megatron::Error mentioning '" << needle << "'";
  } catch (const megatron::Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(MultiTensorAdamWReference, MatchesDoublePrecisionLoop) {
  for (const at::ScalarType grad_type : {at::kFloat, at::kBFloat16}) {
    at::manual_seed(1);
    AdamWLists l = make_lists({1, 97, 1025}, at::kCPU, grad_type, at::kBFloat16);
    AdamWHyperparams h;
    h.lr = 1e-2;
    h.beta1 = 0.9;
    h.beta2 = 0.95;
    h.eps = 1e-8;
    h.weight_decay = 0.1;
    h.grad_scale = 0.5;
    std::vector<std::vector<double>> p, m, v;  // the independent loop's state
    for (const auto& t : l.params) {
      const auto a = t.to(at::kDouble).contiguous();
      p.emplace_back(a.data_ptr<double>(), a.data_ptr<double>() + a.numel());
      m.emplace_back(t.numel(), 0.0);
      v.emplace_back(t.numel(), 0.0);
    }
    for (int step = 1; step <= 5; ++step) {
      h.step = step;
      refill_grads(l, 1.0);
      const double bc1 = 1.0 - std::pow(h.beta1, step);
      const double bc2 = 1.0 - std::pow(h.beta2, step);
      for (std::size_t i = 0; i < p.size(); ++i) {
        const auto g = l.grads[i].to(at::kDouble).contiguous();
        for (std::size_t j = 0; j < p[i].size(); ++j) {
          const double gj = g.data_ptr<double>()[j] * h.grad_scale;
          if (l.decays[i]) p[i][j] *= 1.0 - h.lr * h.weight_decay;
          m[i][j] = h.beta1 * m[i][j] + (1.0 - h.beta1) * gj;
          v[i][j] = h.beta2 * v[i][j] + (1.0 - h.beta2) * gj * gj;
          p[i][j] -= h.lr / bc1 * m[i][j] / (std::sqrt(v[i][j] / bc2) + h.eps);
        }
      }
      megatron::kernels::aten::multi_tensor_adamw_reference_(l, h);
      for (std::size_t i = 0; i < p.size(); ++i) {
        const std::string what = std::string("step ") + std::to_string(step) + " tensor " + std::to_string(i) +
                                  " grads " + c10::toString(grad_type);
        const auto opts = at::TensorOptions().dtype(at::kDouble);
        expect_close(l.params[i], at::from_blob(p[i].data(), {static_cast<int64_t>(p[i].size())}, opts),
                     Tolerance::elementwise(2e-6, 1e-5), what + " param");
        expect_close(l.exp_avgs[i], at::from_blob(m[i].data(), {static_cast<int64_t>(m[i].size())}, opts),
                     Tolerance::elementwise(1e-6, 1e-5), what + " exp_avg");
        expect_close(l.exp_avg_sqs[i], at::from_blob(v[i].data(), {static_cast<int64_t>(v[i].size())}, opts),
                     Tolerance::elementwise(1e-7, 1e-5), what + " exp_avg_sq");
        expect_equal(l.param_copies[i], l.params[i].to(at::kBFloat16), what + " bf16 copy");
      }
    }
  }
}

TEST(MultiTensorAdamWReference, SkipsTheStepOnNonFiniteScaledGrads) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  // (bad value, grad_scale): inf, nan, and a finite grad that overflows once scaled.
  for (const auto& [bad, scale] : std::vector<std::pair<double, double>>{{inf, 1.0}, {nan, 0.5}, {1e30, 1e10}}) {
    at::manual_seed(2);
    AdamWLists l = make_lists({97, 1025}, at::kCPU, at::kFloat, at::kBFloat16);
    l.grads[1][1024] = bad;
    const AdamWLists before = clone_lists(l);
    AdamWHyperparams h;
    h.grad_scale = scale;
    h.weight_decay = 0.1;
    const at::Tensor found_inf = at::zeros({1}, at::kInt);
    megatron::kernels::aten::multi_tensor_adamw_reference_(l, h, found_inf);
    EXPECT_EQ(found_inf.item<int>(), 1) << "bad grad " << bad << " scale " << scale;
    for (std::size_t i = 0; i < l.params.size(); ++i) {
      expect_equal(l.params[i], before.params[i], "param after a skipped step");
      expect_equal(l.exp_avgs[i], before.exp_avgs[i], "exp_avg after a skipped step");
      expect_equal(l.exp_avg_sqs[i], before.exp_avg_sqs[i], "exp_avg_sq after a skipped step");
    }
  }
  // All finite: the flag stays 0 and the step happens.
  AdamWLists l = make_lists({97}, at::kCPU, at::kFloat, std::nullopt);
  const at::Tensor p0 = l.params[0].clone();
  const at::Tensor found_inf = at::zeros({1}, at::kInt);
  megatron::kernels::aten::multi_tensor_adamw_reference_(l, AdamWHyperparams{}, found_inf);
  EXPECT_EQ(found_inf.item<int>(), 0);
  EXPECT_FALSE(l.params[0].equal(p0));
}

TEST(MultiTensorAdamW, RejectsBadListsNamingListAndIndex) {
  using megatron::kernels::aten::multi_tensor_adamw_;
  using megatron::kernels::aten::multi_tensor_adamw_reference_;
  const AdamWHyperparams h;
  {
    const AdamWLists l = make_lists({4, 5}, at::kCPU, at::kFloat, std::nullopt);
    expect_error_mentions([&] { multi_tensor_adamw_(l, h); }, "CUDA");
  }
  {
    AdamWLists l = make_lists({4, 5, 6}, at::kCPU, at::kFloat, std::nullopt);
    l.grads[2] = at::zeros({7});
    expect_error_mentions([&] { multi_tensor_adamw_reference_(l, h); }, "grads[2] has 7 elements");
  }
  {
    AdamWLists l = make_lists({4, 6}, at::kCPU, at::kFloat, std::nullopt);
    l.exp_avgs[1] = at::zeros({3, 2}).t();
    expect_error_mentions([&] { multi_tensor_adamw_reference_(l, h); }, "exp_avgs[1] is not contiguous");
  }
  {
    AdamWLists l = make_lists({4, 6}, at::kCPU, at::kFloat, std::nullopt);
    l.grads[1] = l.grads[1].to(at::kBFloat16);
    expect_error_mentions([&] { multi_tensor_adamw_reference_(l, h); }, "grads[1] has dtype");
  }
  {
    AdamWLists l = make_lists({4, 6}, at::kCPU, at::kFloat, std::nullopt);
    l.params[1] = l.params[1].to(at::kDouble);
    expect_error_mentions([&] { multi_tensor_adamw_reference_(l, h); }, "params[1], exp_avgs[1]");
  }
  {
    AdamWLists l = make_lists({4, 6}, at::kCPU, at::kFloat, at::kFloat);
    expect_error_mentions([&] { multi_tensor_adamw_reference_(l, h); }, "param_copies[0] has dtype");
  }
  {
    AdamWLists l = make_lists({4, 6}, at::kCPU, at::kFloat, std::nullopt);
    l.exp_avg_sqs.pop_back();
    expect_error_mentions([&] { multi_tensor_adamw_reference_(l, h); }, "list lengths differ");
  }
}

// ---- GPU ----

// Odd and tail sizes, the 3M one, a chunk boundary (16384) +- 1, and enough small tensors to take
// more than one launch (48 tensors per launch).
std::vector<int64_t> gpu_sizes() {
  std::vector<int64_t> sizes = {1, 97, 1025, 4097, 3'000'001, 16383, 16384, 16385, 8192};
  for (int i = 0; i < 45; ++i) sizes.push_back(1 + 37 * i);
  return sizes;
}

// Replaces tensor `i` of every list with a view at element offset 1 of a larger buffer (contiguous
// but not 16-byte aligned), so the scalar path runs.
void misalign(AdamWLists& l, std::size_t i) {
  auto shift = [](at::Tensor& t) {
    at::Tensor buf = at::empty({t.numel() + 1}, t.options());
    at::Tensor view = buf.narrow(0, 1, t.numel());
    view.copy_(t);
    t = view;
  };
  shift(l.params[i]);
  shift(l.grads[i]);
  shift(l.exp_avgs[i]);
  shift(l.exp_avg_sqs[i]);
  if (!l.param_copies.empty()) shift(l.param_copies[i]);
}

TEST(MultiTensorAdamWGpu, MatchesReferenceOverOddSizesInEveryDtype) {
  MEGATRON_REQUIRE_GPU();
  for (const at::ScalarType grad_type : megatron::testing::kernel_dtypes()) {
    for (const at::ScalarType copy_type : {at::kBFloat16, at::kHalf}) {
      at::manual_seed(3);
      AdamWLists fused = make_lists(gpu_sizes(), at::kCUDA, grad_type, copy_type);
      misalign(fused, 1);  // 97
      misalign(fused, 3);  // 4097
      fused.param_copies[5] = at::Tensor();  // a tensor without a copy
      AdamWLists ref = clone_lists(fused);
      AdamWHyperparams h;
      h.lr = 3e-3;
      h.beta2 = 0.95;
      h.weight_decay = 0.1;
      h.grad_scale = 0.25;
      for (int step = 1; step <= 4; ++step) {
        h.step = step;
        refill_grads(fused, 2.0);
        for (std::size_t i = 0; i < fused.grads.size(); ++i) ref.grads[i].copy_(fused.grads[i]);
        megatron::kernels::aten::multi_tensor_adamw_(fused, h);
        megatron::kernels::aten::multi_tensor_adamw_reference_(ref, h);
      }
      for (std::size_t i = 0; i < fused.params.size(); ++i) {
        const std::string what = "tensor " + std::to_string(i) + " (" + std::to_string(fused.params[i].numel()) +
                                 " elements) grads " + c10::toString(grad_type) + " copy " + c10::toString(copy_type);
        expect_close(fused.params[i], ref.params[i], Tolerance::elementwise(1e-6, 1e-5), what + " param");
        expect_close(fused.exp_avgs[i], ref.exp_avgs[i], Tolerance::elementwise(1e-6, 1e-5), what + " exp_avg");
        expect_close(fused.exp_avg_sqs[i], ref.exp_avg_sqs[i], Tolerance::elementwise(1e-7, 1e-5),
                     what + " exp_avg_sq");
        if (fused.param_copies[i].defined()) {
          expect_equal(fused.param_copies[i], fused.params[i].to(copy_type), what + " copy of the kernel's params");
        }
      }
    }
  }
}

TEST(MultiTensorAdamWGpu, SkipsTheStepWhenFoundInf) {
  MEGATRON_REQUIRE_GPU();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (const at::ScalarType grad_type : megatron::testing::kernel_dtypes()) {
    for (const auto& [bad, scale] : std::vector<std::pair<double, double>>{{inf, 1.0}, {-inf, 1.0}, {nan, 0.5}, {6e4, 1e36}}) {
      at::manual_seed(4);
      AdamWLists l = make_lists(gpu_sizes(), at::kCUDA, grad_type, at::kBFloat16);
      misalign(l, 3);
      l.grads[3][4096] = bad;  // the tail element of a misaligned tensor
      const AdamWLists before = clone_lists(l);
      AdamWHyperparams h;
      h.grad_scale = scale;
      const at::Tensor found_inf = at::zeros({1}, l.params[0].options().dtype(at::kInt));
      megatron::kernels::aten::multi_tensor_adamw_(l, h, found_inf);
      const std::string what = std::string("grads ") + c10::toString(grad_type) + " bad " + std::to_string(bad);
      EXPECT_EQ(found_inf.item<int>(), 1) << what;
      for (std::size_t i = 0; i < l.params.size(); ++i) {
        expect_equal(l.params[i], before.params[i], what + " param " + std::to_string(i));
        expect_equal(l.exp_avgs[i], before.exp_avgs[i], what + " exp_avg " + std::to_string(i));
        expect_equal(l.exp_avg_sqs[i], before.exp_avg_sqs[i], what + " exp_avg_sq " + std::to_string(i));
        expect_equal(l.param_copies[i], before.param_copies[i], what + " copy " + std::to_string(i));
      }
    }
  }
}

TEST(MultiTensorAdamWGpu, FoundInfSetBeforehandSkipsAndFiniteGradsLeaveItZero) {
  MEGATRON_REQUIRE_GPU();
  AdamWLists l = make_lists(gpu_sizes(), at::kCUDA, at::kBFloat16, at::kBFloat16);
  const AdamWLists before = clone_lists(l);
  const at::Tensor found_inf = at::ones({1}, l.params[0].options().dtype(at::kInt));
  megatron::kernels::aten::multi_tensor_adamw_(l, AdamWHyperparams{}, found_inf);
  for (std::size_t i = 0; i < l.params.size(); ++i) expect_equal(l.params[i], before.params[i], "param, flag preset");

  found_inf.zero_();
  AdamWLists ref = clone_lists(l);
  megatron::kernels::aten::multi_tensor_adamw_(l, AdamWHyperparams{}, found_inf);
  megatron::kernels::aten::multi_tensor_adamw_reference_(ref, AdamWHyperparams{});
  EXPECT_EQ(found_inf.item<int>(), 0);
  for (std::size_t i = 0; i < l.params.size(); ++i) {
    expect_close(l.params[i], ref.params[i], Tolerance::elementwise(1e-6, 1e-5),
                 "param " + std::to_string(i) + " with a clear flag");
  }
}

TEST(MultiTensorAdamWGpu, SinglePassReportSetsTheFlag) {
  MEGATRON_REQUIRE_GPU();
#if MEGATRON_CUDA_KERNELS  // the raw launcher, below the ATen entry
  using namespace megatron::kernels;
  AdamWLists l = make_lists({97, 4097, 20000}, at::kCUDA, at::kFloat, std::nullopt);
  std::vector<AdamWTensorArgs> tensors;
  for (std::size_t i = 0; i < l.params.size(); ++i) {
    tensors.push_back({l.params[i].data_ptr<float>(), l.grads[i].data_ptr(), l.exp_avgs[i].data_ptr<float>(),
                       l.exp_avg_sqs[i].data_ptr<float>(), nullptr, l.params[i].numel(), true});
  }
  const at::Tensor found_inf = at::zeros({1}, l.params[0].options().dtype(at::kInt));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  multi_tensor_adamw(tensors, DType::kFloat32, DType::kBFloat16, AdamWHyperparams{}, found_inf.data_ptr<int>(),
                     InfCheck::kReport, stream);
  EXPECT_EQ(found_inf.item<int>(), 0) << "finite grads";
  l.grads[2][19999] = std::numeric_limits<double>::quiet_NaN();
  multi_tensor_adamw(tensors, DType::kFloat32, DType::kBFloat16, AdamWHyperparams{}, found_inf.data_ptr<int>(),
                     InfCheck::kReport, stream);
  EXPECT_EQ(found_inf.item<int>(), 1) << "a NaN grad in the last element";
#endif
}

TEST(MultiTensorAdamWGpu, AllFiniteFindsOneBadElementAnywhere) {
  MEGATRON_REQUIRE_GPU();
  for (const at::ScalarType grad_type : megatron::testing::kernel_dtypes()) {
    for (const int64_t where : {int64_t{0}, int64_t{16383}, int64_t{16384}, int64_t{3'000'000}}) {
      std::vector<at::Tensor> grads;
      for (const int64_t n : {int64_t{1}, int64_t{97}, int64_t{3'000'001}, int64_t{1025}}) {
        grads.push_back(at::randn({n}, at::TensorOptions().device(at::kCUDA).dtype(grad_type)));
      }
      const at::Tensor found_inf = at::zeros({1}, grads[0].options().dtype(at::kInt));
      megatron::kernels::aten::multi_tensor_all_finite_(grads, 1.0, found_inf);
      EXPECT_EQ(found_inf.item<int>(), 0) << c10::toString(grad_type);
      grads[2][where] = std::numeric_limits<double>::infinity();
      megatron::kernels::aten::multi_tensor_all_finite_(grads, 1.0, found_inf);
      EXPECT_EQ(found_inf.item<int>(), 1) << c10::toString(grad_type) << " inf at " << where;
    }
  }
}

}  // namespace
