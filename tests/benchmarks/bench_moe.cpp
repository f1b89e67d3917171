// A mixture-of-experts MLP against the dense MLP of the same active parameters, on this machine's
// CPU (fp32, one process): forward + backward of one layer's MLP over [s, b, h] tokens, the MoE
// with E experts of size F and top-k routing (aux loss on), the dense MLP of size k x F (what each
// token computes in both). Also the experts alone as LibTorch's grouped GEMM against one GEMM per
// expert in a loop, on the same permuted tokens.
//   build/tests/benchmarks/bench_moe [E] [k]     (defaults 8 experts, top-2)
// Model: hidden 1024, expert F 1024, SwiGLU; s 1024, b 4; median of 7 runs after 2 warm-ups.
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "megatron/model/moe_layer.h"
#include "megatron/parallel/single_process_context.h"

using namespace megatron;

namespace {

double median_ms(const std::function<void()>& run) {
  for (int i = 0; i < 2; ++i) run();
  std::vector<double> ms;
  for (int i = 0; i < 7; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int experts = argc > 1 ? std::atoi(argv[1]) : 8, topk = argc > 2 ? std::atoi(argv[2]) : 2;
  const std::int64_t h = 1024, f = 1024, s = 1024, b = 4;
  model::ModelConfig c;
  c.num_layers = 1;
  c.hidden_size = static_cast<int>(h);
  c.ffn_hidden_size = static_cast<int>(topk * f);  // the dense MLP: each token's active size
  c.swiglu = true;
  c.moe.num_experts = experts;
  c.moe.router_topk = topk;
  c.moe.ffn_hidden_size = static_cast<int>(f);
  c.moe.aux_loss_coeff = 1e-2;
  parallel::LinearOptions options;
  options.bias = false;
  const parallel::ParameterInit init(1);
  const parallel::ParallelContext& pc = parallel::single_process_context();
  const model::MoeLayer moe(c, init.scope("moe."), pc, options);
  const model::Mlp dense(c, init.scope("dense."), pc, options);
  const at::Tensor x = at::randn({s, b, h}).requires_grad_();
  const at::Tensor dout = at::randn({s, b, h});
  const model::ForwardContext ctx{true};
  const double moe_ms = median_ms([&] { moe.forward(x, ctx).first.backward(dout); });
  const double dense_ms = median_ms([&] { dense.forward(x).first.backward(dout); });
  std::printf("MoE %d experts top-%d (F %lld) vs dense MLP %lld, h %lld, %lld tokens, forward + backward, fp32 CPU:\n",
              experts, topk, static_cast<long long>(f), static_cast<long long>(topk * f), static_cast<long long>(h),
              static_cast<long long>(s * b));
  std::printf("  MoE %.1f ms, dense %.1f ms, MoE / dense = %.2f\n", moe_ms, dense_ms, moe_ms / dense_ms);

  // The experts alone: k x tokens rows split over the experts as the router split them.
  const at::Tensor counts = moe.last_routing().routing_map.sum(0);
  const std::int64_t rows = counts.sum().item<std::int64_t>();
  const at::Tensor tokens = at::randn({rows, h});
  const at::Tensor w = at::randn({experts, 2 * f, h}) * 0.02;
  const at::Tensor offsets = counts.cumsum(0).to(at::kInt);
  const double grouped_ms = median_ms([&] { at::_grouped_mm(tokens, w.transpose(1, 2), offsets); });
  const double loop_ms = median_ms([&] {
    std::vector<at::Tensor> parts;
    std::int64_t row = 0;
    for (int e = 0; e < experts; ++e) {
      const std::int64_t n = counts[e].item<std::int64_t>();
      parts.push_back(at::matmul(tokens.narrow(0, row, n), w[e].t()));
      row += n;
    }
    at::cat(parts, 0);
  });
  std::printf("  experts' fc1 (%lld rows): grouped GEMM %.1f ms, one GEMM per expert %.1f ms, loop / grouped = %.2f\n",
              static_cast<long long>(rows), grouped_ms, loop_ms, loop_ms / grouped_ms);
  return 0;
}
