// Model initialisation, what a rank pays before its first step, measured in one process:
//   - the draw rate per thread of the counter-based stream (parallel/parameter_init.h) against
//     LibTorch's own normal_ on the same tensor (the former whole-model CPU draw);
//   - building the GptModel of a 350M GPT (24 layers x 1024, 16 heads, vocabulary 50304, 2048
//     positions, untied) as one process and as one rank of TP 2 x PP 2 and of TP 4 (a rank's TP
//     group simulated in-process: the model draws only what that rank holds), time and peak CPU
//     bytes (counted by a CPU allocator), against the former scheme's cost for any rank: normal_
//     over every element of the model;
//   - from the measured rates, a 175B rank's (TP 8 x PP 16) initialisation before and after;
//   - with a GPU: the CUDA kernel's draw rate against LibTorch's normal_ on the same GPU tensor
//     and its write bandwidth (fp32, 4 bytes per value).
// Threads: --threads (default 1), the same for every figure. Usage:
//   build/tests/benchmarks/bench_init [--threads 1] [--repeat 3]
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "counting_allocator.h"
#include "megatron/kernels/aten/init_ops.h"
#include "megatron/kernels/device.h"
#include "megatron/model/gpt_model.h"
#include "megatron/parallel/parameter_init.h"
#include "megatron/parallel/single_process_context.h"

namespace {

using Clock = std::chrono::steady_clock;

double best_seconds(int repeat, const std::function<void()>& fn) {
  double best = 1e30;
  for (int i = 0; i < repeat; ++i) {
    const auto t0 = Clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

megatron::model::ModelConfig gpt_350m() {
  megatron::model::ModelConfig c;
  c.num_layers = 24;
  c.hidden_size = 1024;
  c.ffn_hidden_size = 4096;
  c.num_attention_heads = 16;
  c.num_query_groups = 16;
  c.kv_channels = 64;
  c.seq_length = 2048;
  c.max_position_embeddings = 2048;
  c.padded_vocab_size = 50304;
  c.untie_embeddings_and_output_weights = true;
  c.init_method_std = 0.02;
  return c;
}

struct Rank {
  const char* name;
  int tp;
  int pp;
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, repeat = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--repeat") == 0) repeat = std::atoi(argv[i + 1]);
  }
  at::set_num_threads(threads);
  megatron::testing::CountingAllocator counter;

  // 1. Draw rates on one 64M-element tensor.
  const std::int64_t n = std::int64_t{1} << 26;
  at::Tensor t = at::empty({n});
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1);
  const double normal_s = best_seconds(repeat, [&] { t.normal_(0.0, 0.02, gen); });
  const megatron::kernels::ShardRuns all{1, n, 1, 0, 0, 0};
  const double counter_s = best_seconds(repeat, [&] { megatron::kernels::fill_counter_normal(t, 42, 0.02, all); });
  t = at::Tensor();
  const double normal_rate = n / normal_s, counter_rate = n / counter_s;
  std::printf("threads %d\nLibTorch normal_: %.0f M values/s; counter-based stream: %.0f M values/s (%.2fx)\n",
              threads, normal_rate / 1e6, counter_rate / 1e6, counter_rate / normal_rate);

  // 2. The 350M model: one process, and one rank of TP2 x PP2 and of TP4.
  const megatron::model::ModelConfig c = gpt_350m();
  std::int64_t model_elements = 0;
  std::printf("\n350M GPT (24 x 1024, vocabulary 50304, 2048 positions, untied), building the model:\n");
  std::printf("%-22s %12s %10s %12s %14s\n", "rank", "parameters", "time s", "peak GB", "former time s");
  for (const Rank& r : {Rank{"one process", 1, 1}, Rank{"TP2 x PP2, rank 0", 2, 2}, Rank{"TP4, rank 0", 4, 1}}) {
    std::vector<int> ranks(r.tp);
    for (int i = 0; i < r.tp; ++i) ranks[i] = i;
    megatron::parallel::ParallelContext pc = megatron::parallel::single_process_context();
    pc.tp = std::make_shared<megatron::parallel::ProcessGroup>("tensor-model-parallel", ranks, 0);
    const megatron::model::StageSpec stage{0, c.num_layers / r.pp, true, r.pp == 1};
    std::int64_t elements = 0, peak = 0;
    const double seconds = best_seconds(repeat, [&] {
      counter.reset();
      const std::int64_t before = counter.current();
      const megatron::model::GptModel model(c, pc, megatron::parallel::ParameterInit(1234), stage);
      peak = counter.peak_above(before);
      elements = 0;
      for (const auto& [name, p] : model.named_parameters()) elements += p.numel();
    });
    if (r.tp == 1 && r.pp == 1) model_elements = elements;
    // The former scheme drew every element of the model on every rank, one thread (normal_).
    std::printf("%-22s %12lld %10.2f %12.2f %14.2f\n", r.name, static_cast<long long>(elements), seconds,
                static_cast<double>(peak) / 1e9, static_cast<double>(model_elements) / normal_rate);
  }

  // 3. A 175B rank (GPT-3: 96 x 12288, TP 8 x PP 16: 1/128 of the weights), from the rates above.
  const double params_175b = 175e9;
  std::printf("\n175B rank at TP 8 x PP 16, initialisation estimated from the rates above:\n"
              "  former (every full weight, normal_ on %d thread(s)): %.0f s\n"
              "  counter-based, CPU (its 1/128 shard): %.1f s; on a GPU the same shard is drawn by the CUDA kernel\n",
              threads, params_175b / normal_rate, params_175b / 128 / counter_rate);

  // 4. On a GPU: 2^28 values (1 GiB) per draw; reading one element back waits for the stream.
  if (megatron::kernels::cuda_usable()) {
    at::Tensor g = at::empty({std::int64_t{1} << 28}, at::TensorOptions().device(at::kCUDA));
    const megatron::kernels::ShardRuns whole{1, g.numel(), 1, 0, 0, 0};
    auto timed = [&](const std::function<void()>& draw) {
      draw();
      (void)g[0].item<float>();  // warm-up, then the best of `repeat` synchronised runs
      return best_seconds(std::max(repeat, 5), [&] {
        draw();
        (void)g[0].item<float>();
      });
    };
    const double torch_s = timed([&] { g.normal_(0.0, 0.02); });
    const double ours_s = timed([&] { megatron::kernels::fill_counter_normal(g, 42, 0.02, whole); });
    const double nv = static_cast<double>(g.numel());
    std::printf("\nGPU, 2^28 fp32 values: LibTorch normal_ %.1f G values/s; counter-based kernel %.1f G values/s "
                "(%.2fx), %.0f GB/s written\n",
                nv / torch_s / 1e9, nv / ours_s / 1e9, torch_s / ours_s, nv * 4 / ours_s / 1e9);
  }
  return 0;
}
