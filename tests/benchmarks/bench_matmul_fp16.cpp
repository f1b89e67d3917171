// Benchmark (not a test) of float16 matrix products on the CPU: kernels::ops::linear and matmul
// (fp32 products of the fp16 inputs, rounded back) against LibTorch's own float16 at::linear /
// at::matmul, forward and backward, at the shapes of the small GPTs the CPU runs train (tokens x
// hidden against the output layer's vocabulary, an MLP, attention scores, the experts' grouped
// product), on one thread. Prints
// the median time of each and the ratio, measured in the same run, and the largest difference
// of the products relative to their largest element.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "megatron/kernels/ops.h"

namespace {

double median_ms(const std::function<void()>& fn, int repeats = 7) {
  fn();  // warm-up
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// `product(a, b)` forward and backward, ours against ATen's.
void compare(const char* name, const at::Tensor& a0, const at::Tensor& b0,
             const std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>& ours,
             const std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>& aten) {
  const at::Tensor a = a0.detach().requires_grad_(), b = b0.detach().requires_grad_();
  const at::Tensor grad = at::randn_like(ours(a, b)).to(at::kHalf);
  const auto step = [&](const auto& product) {
    return [&] {
      a.mutable_grad().reset();
      b.mutable_grad().reset();
      product(a, b).backward(grad);
    };
  };
  const double ours_ms = median_ms(step(ours)), aten_ms = median_ms(step(aten));
  const at::Tensor x = ours(a, b).to(at::kFloat), y = aten(a, b).to(at::kFloat);
  const double diff = (x - y).abs().max().item<double>() / y.abs().max().item<double>();
  std::printf("%-34s ours %8.2f ms | ATen fp16 %9.2f ms | %6.1fx | max diff %.1e of the largest\n", name, ours_ms,
              aten_ms, aten_ms / ours_ms, diff);
}

}  // namespace

int main() {
  at::set_num_threads(1);
  namespace ops = megatron::kernels::ops;
  const auto half = at::TensorOptions().dtype(at::kHalf);
  const auto linear = [](const at::Tensor& x, const at::Tensor& w) { return ops::linear(x, w); };
  const auto aten_linear = [](const at::Tensor& x, const at::Tensor& w) { return at::linear(x, w); };
  const auto matmul = [](const at::Tensor& x, const at::Tensor& w) { return ops::matmul(x, w); };
  const auto aten_matmul = [](const at::Tensor& x, const at::Tensor& w) { return at::matmul(x, w); };
  std::printf("float16 products on the CPU, forward + backward, 1 thread\n");
  compare("output layer 64 x 64 @ 64 x 50688", at::randn({64, 64}, half), at::randn({64, 50688}, half), matmul,
          aten_matmul);
  compare("MLP fc1 512 x 256 -> 1024", at::randn({512, 256}, half), at::randn({1024, 256}, half), linear,
          aten_linear);
  compare("scores [32, 128, 64] @ [32, 64, 128]", at::randn({32, 128, 64}, half), at::randn({32, 64, 128}, half),
          matmul, aten_matmul);
  // 8 experts of 64 rows each, h 256 -> F 512 (the experts' fc1).
  const at::Tensor offsets = at::arange(1, 9, at::kInt) * 64;
  compare("grouped 8 x [64 x 256] @ [256 x 512]", at::randn({512, 256}, half), at::randn({8, 256, 512}, half),
          [&](const at::Tensor& x, const at::Tensor& w) { return ops::grouped_mm(x, w, offsets); },
          [&](const at::Tensor& x, const at::Tensor& w) { return at::_grouped_mm(x, w, offsets); });
  return 0;
}
