// Benchmarks (not tests): the fused multi-tensor AdamW over a ~1B-parameter GPT's tensors, as GB/s
// against the device's copy bandwidth and against the per-tensor ATen reference; and causal
// self-attention forward + backward per SDPA back end in bf16, as time and TFLOP/s. Needs a GPU;
// without one it says so and exits non-zero.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "megatron/kernels/aten/adamw_ops.h"
#include "megatron/kernels/aten/attention_ops.h"
#include "megatron/kernels/cuda_check.h"
#include "megatron/kernels/device_info.h"
#include "gpu_timing.h"

namespace {

using megatron::kernels::AdamWHyperparams;
using megatron::kernels::aten::AdamWLists;
using megatron::kernels::aten::AttentionBackend;

// Best time of `repeats` runs of fn on the current stream, in milliseconds, after `warmup` runs.
double time_ms(const std::function<void()>& fn, int warmup, int repeats) {
  return megatron::bench::time_on_current_stream(fn, warmup, repeats).best_ms;
}

// Parameter shapes of a GPT with hidden 2048, ffn 8192, 18 layers, vocab 50304, 2048 positions:
// 1.01e9 parameters; 1-D tensors (biases, norms) do not decay.
std::vector<std::vector<int64_t>> gpt_1b_shapes() {
  const int64_t h = 2048, ffn = 8192, layers = 18, vocab = 50304, positions = 2048;
  std::vector<std::vector<int64_t>> shapes = {{vocab, h}, {positions, h}};
  for (int64_t l = 0; l < layers; ++l) {
    for (const auto& s : std::vector<std::vector<int64_t>>{{h}, {h}, {3 * h, h}, {3 * h}, {h, h}, {h}, {h}, {h},
                                                             {ffn, h}, {ffn}, {h, ffn}, {h}}) {
      shapes.push_back(s);
    }
  }
  shapes.push_back({h});
  shapes.push_back({h});
  return shapes;
}

void bench_adamw(double copy_gbs) {
  for (const at::ScalarType grad_type : {at::kFloat, at::kBFloat16}) {
    AdamWLists l;
    int64_t params = 0;
    const auto f32 = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
    for (const auto& shape : gpt_1b_shapes()) {
      l.params.push_back(at::randn(shape, f32));
      l.grads.push_back(at::randn(shape, f32).to(grad_type));
      l.exp_avgs.push_back(at::zeros(shape, f32));
      l.exp_avg_sqs.push_back(at::zeros(shape, f32));
      l.param_copies.push_back(at::empty(shape, f32.dtype(at::kBFloat16)));
      l.decays.push_back(shape.size() > 1);
      params += l.params.back().numel();
    }
    const double bytes_per_param = 4 + at::elementSize(grad_type) + 4 + 4 + 4 + 4 + 4 + 2;  // read p g m v, write p m v copy
    const double bytes = bytes_per_param * static_cast<double>(params);
    AdamWHyperparams h;
    h.weight_decay = 0.1;
    h.grad_scale = 0.5;
    const at::Tensor found_inf = at::zeros({1}, f32.dtype(at::kInt));
    const double fused = time_ms([&] { megatron::kernels::aten::multi_tensor_adamw_(l, h); }, 3, 10);
    const double two_pass = time_ms([&] { megatron::kernels::aten::multi_tensor_adamw_(l, h, found_inf); }, 3, 10);
    const double reference = time_ms([&] { megatron::kernels::aten::multi_tensor_adamw_reference_(l, h); }, 1, 3);
    auto gbs = [&](double ms) { return bytes / (ms * 1e-3) / 1e9; };
    std::printf("adamw %zu tensors, %.3fe9 params, grads %s, bf16 copy, %.0f bytes/param\n", l.params.size(),
                static_cast<double>(params) / 1e9, c10::toString(grad_type), bytes_per_param);
    std::printf("  fused               %8.2f ms  %7.0f GB/s  %5.1f%% of copy bandwidth\n", fused, gbs(fused),
                100.0 * gbs(fused) / copy_gbs);
    std::printf("  fused + found_inf   %8.2f ms  %7.0f GB/s  %5.1f%% (all-finite check, then update-or-skip)\n",
                two_pass, gbs(two_pass), 100.0 * gbs(two_pass) / copy_gbs);
    std::printf("  ATen reference      %8.2f ms  %7.0f GB/s  (per-tensor ops; fused is %.1fx faster)\n", reference,
                gbs(reference), reference / fused);
  }
}

void bench_attention() {
  const int64_t hn = 128, tokens = 16384;
  std::printf("\ncausal self-attention, bf16, hn %ld, b*s = %ld tokens; TFLOP/s counts the causal half\n", hn, tokens);
  std::printf("  %-9s %5s %5s %3s %10s %10s %9s %9s %9s\n", "backend", "s", "heads", "b", "fwd ms", "bwd ms",
              "fwd TF/s", "bwd TF/s", "f+b TF/s");
  for (const int64_t s : {2048, 4096}) {
    for (const int64_t heads : {16, 32}) {
      const int64_t b = tokens / s;
      const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
      const at::Tensor q = at::randn({s, b, heads, hn}, opts).requires_grad_(true);
      const at::Tensor k = at::randn({s, b, heads, hn}, opts).requires_grad_(true);
      const at::Tensor v = at::randn({s, b, heads, hn}, opts).requires_grad_(true);
      const at::Tensor grad_out = at::randn({s, b, heads, hn}, opts);
      const double fwd_flop = 4.0 * b * heads * static_cast<double>(s) * s * hn / 2.0;
      const double bwd_flop = 2.5 * fwd_flop;
      for (const AttentionBackend backend : {AttentionBackend::kFlash, AttentionBackend::kCudnn,
                                             AttentionBackend::kEfficient, AttentionBackend::kMath}) {
        const char* name = megatron::kernels::aten::attention_backend_name(backend);
        try {
          at::Tensor out;
          const double fwd = time_ms([&] { out = megatron::kernels::aten::causal_self_attention(q, k, v, 0.0, {}, backend); }, 2, 5);
          const double both = time_ms(
              [&] {
                megatron::kernels::aten::causal_self_attention(q, k, v, 0.0, {}, backend).backward(grad_out);
              },
              2, 5);
          const double bwd = both - fwd;
          std::printf("  %-9s %5ld %5ld %3ld %10.3f %10.3f %9.1f %9.1f %9.1f\n", name, s, heads, b, fwd, bwd,
                      fwd_flop / (fwd * 1e-3) / 1e12, bwd_flop / (bwd * 1e-3) / 1e12,
                      (fwd_flop + bwd_flop) / (both * 1e-3) / 1e12);
        } catch (const std::exception& e) {
          std::printf("  %-9s %5ld %5ld %3ld  unavailable: %.120s\n", name, s, heads, b, e.what());
        }
        q.mutable_grad() = at::Tensor();
        k.mutable_grad() = at::Tensor();
        v.mutable_grad() = at::Tensor();
        c10::cuda::CUDACachingAllocator::emptyCache();
      }
    }
  }
}

}  // namespace

int main() {
  try {
    const auto devices = megatron::kernels::query_devices();
    if (devices.empty() || !at::cuda::is_available()) {
      std::fprintf(stderr, "bench_adamw_attention: no CUDA GPU visible to this process; nothing to measure\n");
      return 1;
    }
    const auto& d = devices[0];
    const double copy_gbs = megatron::kernels::measure_copy_bandwidth_gbs(0, std::size_t{1} << 30, 10);
    std::printf("device 0: %s (sm_%d%d, %d SMs, %.0f GiB); cudaMemcpy D2D %.0f GB/s (read + write)\n\n",
                d.name.c_str(), d.sm_major, d.sm_minor, d.multiprocessors, d.memory_gib, copy_gbs);
    bench_adamw(copy_gbs);
    bench_attention();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_adamw_attention: %s\n", e.what());
    return 1;
  }
}
