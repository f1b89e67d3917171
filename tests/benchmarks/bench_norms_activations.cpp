// Benchmark (not a test) of the norm and activation kernels at training shapes (8192 tokens x
// hidden 1024/4096/8192, bf16): time per call, achieved GB/s against the device's measured copy
// bandwidth (minimal bytes: each input read once, each output written once), and the speed-up over
// the plain ATen reference. cudaEvent timing, warm-up, median of repeats. Needs a GPU.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <functional>
#include <vector>

#include "megatron/kernels/aten/activation_ops.h"
#include "megatron/kernels/aten/norm_ops.h"
#include "megatron/kernels/cuda_check.h"
#include "megatron/kernels/device_info.h"
#include "gpu_timing.h"

namespace ka = megatron::kernels::aten;

namespace {

constexpr int kWarmup = 3;
constexpr int kRepeats = 20;

double median_ms(const std::function<void()>& fn) {
  return megatron::bench::time_on_current_stream(fn, kWarmup, kRepeats).median_ms;
}

void report(const char* name, int64_t hidden, double bytes, double copy_gbs, const std::function<void()>& kernel,
            const std::function<void()>& reference) {
  const double k_ms = median_ms(kernel);
  const double r_ms = median_ms(reference);
  const double gbs = bytes / (k_ms * 1e-3) / 1e9;
  std::printf("%-22s h=%-5lld %9.3f ms %8.1f GB/s %5.1f%% of copy | reference %9.3f ms (%.2fx)\n", name,
              static_cast<long long>(hidden), k_ms, gbs, 100.0 * gbs / copy_gbs, r_ms, r_ms / k_ms);
}

void bench_hidden(int64_t tokens, int64_t h, double copy_gbs) {
  const auto opts = at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA);
  const double e = 2.0;  // bytes per bf16 element
  const double n = static_cast<double>(tokens * h);
  const at::Tensor x = at::randn({tokens, h}, opts);
  const at::Tensor r = at::randn({tokens, h}, opts);
  const at::Tensor dy = at::randn({tokens, h}, opts);
  const at::Tensor w = at::randn({h}, opts);
  const at::Tensor b = at::randn({h}, opts);
  const double eps = 1e-5;
  const ka::NormOutputs ln = ka::layer_norm_fwd(x, w, b, eps);
  const ka::NormOutputs rms = ka::rms_norm_fwd(x, w, eps);

  report("layer_norm_fwd", h, 2 * n * e, copy_gbs, [&] { ka::layer_norm_fwd(x, w, b, eps); },
         [&] { ka::layer_norm_reference(x, w, b, eps); });
  report("layer_norm_fwd+resid", h, 4 * n * e, copy_gbs, [&] { ka::layer_norm_fwd(x, w, b, eps, r); },
         [&] { ka::layer_norm_reference(x, w, b, eps, r); });
  report("layer_norm_bwd", h, 3 * n * e, copy_gbs,
         [&] { ka::layer_norm_bwd(dy, x, w, ln.mean, ln.rstd, true); },
         [&] { ka::layer_norm_bwd_reference(dy, x, w, ln.mean, ln.rstd, true); });
  report("rms_norm_fwd", h, 2 * n * e, copy_gbs, [&] { ka::rms_norm_fwd(x, w, eps); },
         [&] { ka::rms_norm_reference(x, w, eps); });
  report("rms_norm_bwd", h, 3 * n * e, copy_gbs, [&] { ka::rms_norm_bwd(dy, x, w, rms.rstd); },
         [&] { ka::rms_norm_bwd_reference(dy, x, w, rms.rstd); });

  // MLP activations at ffn = 4h: bias_gelu on [tokens, 4h], swiglu on [tokens, 2 * 4h].
  const int64_t ffn = 4 * h;
  const double m = static_cast<double>(tokens * ffn);
  const at::Tensor a = at::randn({tokens, ffn}, opts);
  const at::Tensor ab = at::randn({ffn}, opts);
  const at::Tensor da = at::randn({tokens, ffn}, opts);
  const at::Tensor s = at::randn({tokens, 2 * ffn}, opts);
  report("bias_gelu_fwd", h, 2 * m * e, copy_gbs, [&] { ka::bias_gelu_fwd(a, ab); },
         [&] { ka::bias_gelu_reference(a, ab); });
  report("bias_gelu_bwd (dx)", h, 3 * m * e, copy_gbs, [&] { ka::bias_gelu_bwd(da, a); },
         [&] { ka::bias_gelu_bwd_reference(da, a); });
  report("swiglu_fwd", h, 3 * m * e, copy_gbs, [&] { ka::swiglu_fwd(s); }, [&] { ka::swiglu_reference(s); });
  report("swiglu_bwd", h, 5 * m * e, copy_gbs, [&] { ka::swiglu_bwd(da, s); },
         [&] { ka::swiglu_bwd_reference(da, s); });
}

}  // namespace

int main() {
  try {
    const auto devices = megatron::kernels::query_devices();
    if (devices.empty() || !at::cuda::is_available()) {
      std::fprintf(stderr, "bench_norms_activations: no CUDA GPU visible to this process; nothing to measure\n");
      return 1;
    }
    const double copy_gbs = megatron::kernels::measure_copy_bandwidth_gbs(0, std::size_t{1} << 30, 10);
    std::printf("%s (sm_%d%d, %d SMs): device-to-device copy %.1f GB/s; bf16, 8192 tokens\n",
                devices[0].name.c_str(), devices[0].sm_major, devices[0].sm_minor, devices[0].multiprocessors,
                copy_gbs);
    for (const int64_t h : {1024, 4096, 8192}) bench_hidden(8192, h, copy_gbs);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_norms_activations: %s\n", e.what());
    return 1;
  }
}
