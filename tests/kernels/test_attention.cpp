// Causal self-attention: the plain reference against at::scaled_dot_product_attention on CPU
// (forward and gradients), the interface's validation (CPU), and every SDPA back end against the
// reference in bf16/fp16/fp32 on GPU with STYLE.md rule 9's tolerance (GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "megatron/core/check.h"
#include "megatron/kernels/aten/attention_ops.h"
#include "tensor_expect.h"

namespace {

using megatron::kernels::aten::AttentionBackend;
using megatron::kernels::aten::causal_self_attention;
using megatron::kernels::aten::causal_self_attention_reference;

struct Result {
  at::Tensor out, dq, dk, dv;
};

// Runs fn(q, k, v) on copies of the masters in `dtype` and back-propagates grad_out.
template <typename Fn>
Result run(Fn&& fn, const std::vector<at::Tensor>& masters, const at::Tensor& grad_out, at::ScalarType dtype) {
  std::vector<at::Tensor> x;
  for (const auto& m : masters) x.push_back(m.detach().to(dtype).requires_grad_(true));
  const at::Tensor out = fn(x[0], x[1], x[2]);
  out.backward(grad_out.to(dtype));
  return {out.detach(), x[0].grad(), x[1].grad(), x[2].grad()};
}

std::vector<at::Tensor> make_qkv(int64_t s, int64_t b, int64_t heads, int64_t hn, at::Device device) {
  const auto opts = at::TensorOptions().dtype(at::kDouble).device(device);
  return {at::randn({s, b, heads, hn}, opts), at::randn({s, b, heads, hn}, opts), at::randn({s, b, heads, hn}, opts)};
}

using megatron::testing::expect_close;
using megatron::testing::Tolerance;

TEST(CausalSelfAttentionReference, MatchesSdpaOnCpu) {
  at::manual_seed(5);
  for (const at::ScalarType dtype : {at::kDouble, at::kFloat}) {
    const Tolerance tol = Tolerance::absolute(dtype == at::kDouble ? 1e-10 : 2e-5);
    const auto masters = make_qkv(37, 2, 3, 16, at::kCPU);
    const at::Tensor grad_out = at::randn({37, 2, 3, 16}, at::kDouble);
    const Result ref = run([](auto q, auto k, auto v) { return causal_self_attention_reference(q, k, v); }, masters,
                           grad_out, dtype);
    const Result sdpa = run(
        [](auto q, auto k, auto v) {
          auto bhsd = [](const at::Tensor& t) { return t.permute({1, 2, 0, 3}); };
          return at::scaled_dot_product_attention(bhsd(q), bhsd(k), bhsd(v), {}, 0.0, /*is_causal=*/true)
              .permute({2, 0, 1, 3});
        },
        masters, grad_out, dtype);
    const std::string what = c10::toString(dtype);
    expect_close(ref.out, sdpa.out, tol, what + " out");
    expect_close(ref.dq, sdpa.dq, tol, what + " dq");
    expect_close(ref.dk, sdpa.dk, tol, what + " dk");
    expect_close(ref.dv, sdpa.dv, tol, what + " dv");
    for (const AttentionBackend backend : {AttentionBackend::kAuto, AttentionBackend::kMath}) {
      const Result ours = run([&](auto q, auto k, auto v) { return causal_self_attention(q, k, v, 0.0, {}, backend); },
                              masters, grad_out, dtype);
      const std::string name = what + " " + megatron::kernels::aten::attention_backend_name(backend);
      expect_close(ours.out, ref.out, tol, name + " out");
      expect_close(ours.dq, ref.dq, tol, name + " dq");
      expect_close(ours.dk, ref.dk, tol, name + " dk");
      expect_close(ours.dv, ref.dv, tol, name + " dv");
      EXPECT_TRUE(ours.out.is_contiguous());
    }
  }
}

TEST(CausalSelfAttentionReference, IsCausalAndHonoursScale) {
  at::manual_seed(6);
  const auto m = make_qkv(9, 1, 2, 8, at::kCPU);
  const at::Tensor out = causal_self_attention_reference(m[0], m[1], m[2]);
  // Row 0 attends only to key 0: the output is v[0].
  expect_close(out[0], m[2][0], Tolerance::absolute(1e-12), "first position");
  // Changing the future (k, v at positions > 4) leaves positions <= 4 unchanged.
  at::Tensor k2 = m[1].clone();
  at::Tensor v2 = m[2].clone();
  k2.narrow(0, 5, 4).normal_();
  v2.narrow(0, 5, 4).normal_();
  expect_close(causal_self_attention_reference(m[0], k2, v2).narrow(0, 0, 5), out.narrow(0, 0, 5),
               Tolerance::absolute(1e-12), "positions before the change");
  // An explicit scale equals pre-scaling q.
  expect_close(causal_self_attention_reference(m[0], m[1], m[2], 0.0, 0.3),
               causal_self_attention_reference(m[0] * 0.3 * std::sqrt(8.0), m[1], m[2]), Tolerance::absolute(1e-12),
               "scale");
  expect_close(causal_self_attention(m[0], m[1], m[2], 0.0, 0.3, AttentionBackend::kMath),
               causal_self_attention_reference(m[0], m[1], m[2], 0.0, 0.3), Tolerance::absolute(1e-10),
               "scale through sdpa");
}

TEST(CausalSelfAttention, RejectsBadInputs) {
  const auto m = make_qkv(8, 1, 2, 4, at::kCPU);
  auto expect_error = [](auto&& fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "expected megatron::Error mentioning '" << needle << "'";
    } catch (const megatron::Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([&] { causal_self_attention(m[0], m[1].narrow(0, 0, 4), m[2]); }, "[s, b, groups, hn]");
  expect_error([&] { causal_self_attention(m[0], m[1].to(at::kFloat), m[2]); }, "one dtype");
  expect_error([&] { causal_self_attention(m[0].flatten(2), m[1].flatten(2), m[2].flatten(2)); }, "[s, b, heads, hn]");
  expect_error([&] { causal_self_attention(m[0], m[1], m[2], 1.5); }, "dropout_p");
  expect_error([&] { causal_self_attention(m[0], m[1], m[2], 0.0, {}, AttentionBackend::kFlash); }, "needs CUDA");
}

// ---- GPU ----

bool supports(AttentionBackend backend, at::ScalarType dtype) {
  const bool low = dtype == at::kBFloat16 || dtype == at::kHalf;
  return (backend != AttentionBackend::kFlash && backend != AttentionBackend::kCudnn) || low;
}

TEST(CausalSelfAttentionGpu, EveryBackendMatchesTheReferenceForwardAndBackward) {
  MEGATRON_REQUIRE_GPU();
  struct Shape {
    int64_t s, b, heads, hn;
  };
  for (const Shape sh : {Shape{97, 2, 4, 64}, Shape{256, 1, 2, 128}, Shape{1, 3, 2, 64}}) {
    at::manual_seed(7);
    const auto masters = make_qkv(sh.s, sh.b, sh.heads, sh.hn, at::kCUDA);
    const at::Tensor grad_out = at::randn({sh.s, sh.b, sh.heads, sh.hn}, masters[0].options());
    auto reference = [](auto q, auto k, auto v) { return causal_self_attention_reference(q, k, v); };
    const Result high = run(reference, masters, grad_out, at::kDouble);
    for (const at::ScalarType dtype : megatron::testing::kernel_dtypes()) {
      const Result low = run(reference, masters, grad_out, dtype);
      for (const AttentionBackend backend : {AttentionBackend::kFlash, AttentionBackend::kCudnn,
                                             AttentionBackend::kEfficient, AttentionBackend::kMath}) {
        if (!supports(backend, dtype)) continue;
        const std::string what = std::string(megatron::kernels::aten::attention_backend_name(backend)) + " " +
                                 c10::toString(dtype) + " s=" + std::to_string(sh.s) + " hn=" + std::to_string(sh.hn);
        Result fused;
        try {
          fused = run([&](auto q, auto k, auto v) { return causal_self_attention(q, k, v, 0.0, {}, backend); },
                      masters, grad_out, dtype);
        } catch (const std::exception& e) {
          // cuDNN attention depends on the cuDNN build and the GPU; the others must run here.
          if (backend == AttentionBackend::kCudnn) {
            std::cout << "[ SKIPPED  ] " << what << ": " << std::string(e.what()).substr(0, 200) << "\n";
            continue;
          }
          ADD_FAILURE() << what << ": " << e.what();
          continue;
        }
        megatron::testing::expect_within_reference_error(fused.out, low.out, high.out, what + " out");
        megatron::testing::expect_within_reference_error(fused.dq, low.dq, high.dq, what + " dq");
        megatron::testing::expect_within_reference_error(fused.dk, low.dk, high.dk, what + " dk");
        megatron::testing::expect_within_reference_error(fused.dv, low.dv, high.dv, what + " dv");
      }
    }
  }
}

TEST(CausalSelfAttentionGpu, BackendFlagsAreRestored) {
  MEGATRON_REQUIRE_GPU();
  auto& ctx = at::globalContext();
  const bool flash = ctx.userEnabledFlashSDP(), math = ctx.userEnabledMathSDP();
  const auto m = make_qkv(16, 1, 2, 64, at::kCUDA);
  const at::Tensor q = m[0].to(at::kBFloat16), k = m[1].to(at::kBFloat16), v = m[2].to(at::kBFloat16);
  causal_self_attention(q, k, v, 0.0, {}, AttentionBackend::kMath);
  EXPECT_EQ(ctx.userEnabledFlashSDP(), flash);
  EXPECT_EQ(ctx.userEnabledMathSDP(), math);
  // A back end that cannot run the inputs throws, and the flags are restored all the same.
  EXPECT_ANY_THROW(causal_self_attention(q.to(at::kFloat), k.to(at::kFloat), v.to(at::kFloat), 0.0, {},
                                         AttentionBackend::kFlash));
  EXPECT_EQ(ctx.userEnabledFlashSDP(), flash);
  EXPECT_EQ(ctx.userEnabledMathSDP(), math);
}

}  // namespace
