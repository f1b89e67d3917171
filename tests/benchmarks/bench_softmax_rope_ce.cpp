// Benchmark (not a test): causal softmax, RoPE and cross entropy kernels at training shapes,
// as achieved GB/s (bytes the op must move) against the device-to-device copy bandwidth, and
// time against the ATen equivalent. Exits with a message when no GPU is visible.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <functional>

#include "megatron/kernels/aten/cross_entropy_ops.h"
#include "megatron/kernels/aten/rope_ops.h"
#include "megatron/kernels/aten/softmax_ops.h"
#include "megatron/kernels/device_info.h"
#include "gpu_timing.h"

namespace {

// Best-of-`reps` milliseconds of fn on the current stream, after a warm-up call.
double time_ms(const std::function<void()>& fn, int reps = 20) {
  return megatron::bench::time_on_current_stream(fn, 1, reps).best_ms;
}

void report(const char* name, double bytes, double kernel_ms, double aten_ms, double copy_gbs) {
  const double gbs = bytes / (kernel_ms * 1e-3) / 1e9;
  std::printf("%-44s %8.3f ms %8.1f GB/s (%5.1f%% of copy)  ATen %8.3f ms  speedup %5.2fx\n", name, kernel_ms, gbs,
              100.0 * gbs / copy_gbs, aten_ms, aten_ms / kernel_ms);
}

}  // namespace

int main() {
  using namespace megatron::kernels;
  const auto devices = query_devices();
  if (devices.empty() || !at::cuda::is_available()) {
    std::fprintf(stderr, "bench_softmax_rope_ce: no CUDA GPU visible; nothing to measure\n");
    return 1;
  }
  const double copy_gbs = measure_copy_bandwidth_gbs(0, size_t{1} << 30, 10);
  std::printf("device %s: copy bandwidth %.1f GB/s\n", devices[0].name.c_str(), copy_gbs);
  const auto cuda = at::TensorOptions().device(at::kCUDA);
  char name[128];

  // Causal softmax [b*heads, 2048, 2048] bf16: reads the lower triangle, writes everything.
  for (int64_t bh : {32, 128}) {
    const int64_t s = 2048;
    const at::Tensor x = at::randn({bh, s, s}, cuda).to(at::kBFloat16);
    const at::Tensor dy = at::randn_like(x);
    const at::Tensor y = causal_softmax_forward(x, 0.088);
    const at::Tensor mask = at::ones({s, s}, cuda.dtype(at::kBool)).triu(1);
    const double tri = static_cast<double>(bh) * s * (s + 1) / 2 * 2, full = static_cast<double>(bh) * s * s * 2;
    std::snprintf(name, sizeof name, "causal softmax fwd bf16 [%lld, 2048, 2048]", static_cast<long long>(bh));
    report(name, tri + full, time_ms([&] { causal_softmax_forward(x, 0.088); }),
           time_ms([&] { at::softmax((x * 0.088).masked_fill(mask, -10000.0), -1); }), copy_gbs);
    std::snprintf(name, sizeof name, "causal softmax bwd bf16 [%lld, 2048, 2048]", static_cast<long long>(bh));
    report(name, 2 * tri + full, time_ms([&] { causal_softmax_backward(dy, y, 0.088); }),
           time_ms([&] { at::_softmax_backward_data(dy, y, -1, at::kBFloat16) * 0.088; }), copy_gbs);
  }

  // RoPE on q [8192, 1, heads, 128] bf16.
  for (int64_t heads : {32, 64}) {
    const at::Tensor t = at::randn({8192, 1, heads, 128}, cuda).to(at::kBFloat16);
    const at::Tensor freqs = rope_freqs(8192, 128, 10000.0, false, t.device());
    const double bytes = 2.0 * t.numel() * 2;
    std::snprintf(name, sizeof name, "rope fwd bf16 [8192, 1, %lld, 128]", static_cast<long long>(heads));
    report(name, bytes, time_ms([&] { rope_forward(t, freqs, false); }),
           time_ms([&] { rope_forward_reference(t, freqs, false); }), copy_gbs);
    std::snprintf(name, sizeof name, "rope bwd bf16 [8192, 1, %lld, 128]", static_cast<long long>(heads));
    report(name, bytes, time_ms([&] { rope_backward(t, freqs, false); }),
           time_ms([&] { rope_backward_reference(t, freqs, false); }), copy_gbs);
  }

  // Cross entropy, 8192 tokens, bf16 logits. ATen baseline: fp32 log_softmax + nll (forward),
  // autograd-equivalent softmax - onehot (backward).
  for (int64_t vocab : {50304, 128256}) {
    const at::Tensor logits = at::randn({8192, vocab}, cuda).to(at::kBFloat16);
    const at::Tensor target = at::randint(0, vocab, {8192}, cuda.dtype(at::kLong));
    const at::Tensor grad_loss = at::ones({8192}, cuda);
    const CrossEntropyResult r = cross_entropy_forward(logits, target);
    const double elems = 8192.0 * vocab;
    std::snprintf(name, sizeof name, "cross entropy fwd bf16 [8192, %lld]", static_cast<long long>(vocab));
    report(name, elems * 2, time_ms([&] { cross_entropy_forward(logits, target); }),
           time_ms([&] { at::nll_loss(at::log_softmax(logits.to(at::kFloat), -1), target, {}, at::Reduction::None); }),
           copy_gbs);
    const at::Tensor logp = at::log_softmax(logits.to(at::kFloat), -1);
    const at::Tensor total_weight = at::ones({}, cuda);  // unused without reduction, but CUDA requires it
    std::snprintf(name, sizeof name, "cross entropy bwd bf16 [8192, %lld]", static_cast<long long>(vocab));
    report(name, elems * 4, time_ms([&] { cross_entropy_backward(grad_loss, logits, target, r.max, r.sum_exp); }),
           time_ms([&] {
             at::_log_softmax_backward_data(
                 at::nll_loss_backward(grad_loss, logp, target, {}, at::Reduction::None, -100, total_weight), logp, -1,
                 at::kFloat)
                 .to(at::kBFloat16);
           }),
           copy_gbs);
  }
  return 0;
}
