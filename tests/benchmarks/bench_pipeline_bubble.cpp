// The pipeline bubble of our schedules and executor, measured: under mpirun with P ranks (one per
// stage), each stage's forward step takes a fixed time (20 ms / V per chunk, a sleep inside an
// autograd function) and its backward twice that, so the measurement shows the schedule's idle
// time plus the executor's and MPI's overheads, independent of how many cores the ranks share.
// Prints, per layout, each stage's idle share of the iteration (which lasts until the slowest
// stage is done) and its bubble (idle / busy) against Megatron's theory, (P - 1) / (V * M). Usage:
//   tests/mpirun.sh -np P build/tests/benchmarks/bench_pipeline_bubble [V M ...]   (pairs; default
//   "1 4 1 8 2 4 2 8": 1F1B and interleaved at M = 4 and 8)
#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "megatron/parallel/parallel_context.h"
#include "megatron/parallel/pipeline_executor.h"

namespace {

using namespace megatron::parallel;

// Identity that sleeps `ms` milliseconds forward and 2 * ms backward (a stand-in for a chunk's
// compute with the usual 1:2 forward:backward ratio).
struct Sleep : torch::autograd::Function<Sleep> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, double ms) {
    ctx->saved_data["ms"] = ms;
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
    return x.clone();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(2 * ctx->saved_data["ms"].toDouble()));
    return {grads[0], at::Tensor()};
  }
};

}  // namespace

int main(int argc, char** argv) {
  const auto comm = make_communicator();
  const int P = comm->world_size();
  const ParallelState state(ParallelConfig{P, 1, P, 1, false}, comm->rank());
  const ParallelContext pc = ParallelContext::create(state, *comm);
  std::vector<int> pairs = {1, 4, 1, 8, 2, 4, 2, 8};
  if (argc > 1) {
    pairs.clear();
    for (int i = 1; i < argc; ++i) pairs.push_back(std::atoi(argv[i]));
  }
  constexpr double kForwardMs = 20.0;  // per stage and micro-batch, split over its chunks
  if (comm->rank() == 0) {
    std::printf("| P | V | M | stage idle share (mean, max) | bubble = idle / busy (mean) | theory (P-1)/(V*M) |\n");
    std::printf("|---|---|---|---|---|---|\n");
  }
  for (std::size_t k = 0; k + 1 < pairs.size(); k += 2) {
    const int V = pairs[k], M = pairs[k + 1];
    if (V > 1 && P < 2) continue;
    PipelineExecutor executor(pc, PipelineShape{P, V, M, 0}, {4}, at::TensorOptions());
    at::Tensor weight = at::ones({4}).requires_grad_(true);
    PipelineSteps steps;
    steps.forward = [&](int, int chunk, const at::Tensor& input) {
      const at::Tensor x = input.defined() ? input : weight * 1.0;
      const at::Tensor y = Sleep::apply(x, kForwardMs / V);
      const bool last = state.is_last_stage() && chunk == V - 1;
      return last ? y.sum() : y;
    };
    PipelineExecutor::Timing timing;
    for (int iteration = 0; iteration < 3; ++iteration) {  // the last of three
      comm->barrier(*pc.world).wait();  // every stage starts the iteration together
      executor.train(steps);
      timing = executor.last_timing();
    }
    // The iteration lasts until its slowest stage is done (the optimizer step waits for it).
    at::Tensor mine = at::tensor({timing.busy_seconds, timing.total_seconds}, at::kDouble);
    at::Tensor all = at::empty({2 * P}, at::kDouble);
    comm->all_gather(all, mine, *pc.world).wait();
    if (comm->rank() == 0) {
      double iteration_seconds = 0.0;
      for (int r = 0; r < P; ++r) iteration_seconds = std::max(iteration_seconds, all[2 * r + 1].item<double>());
      double idle_sum = 0.0, idle_max = 0.0, bubble_sum = 0.0;
      for (int r = 0; r < P; ++r) {
        const double busy = all[2 * r].item<double>();
        const double idle = 1.0 - busy / iteration_seconds;
        idle_sum += idle;
        idle_max = std::max(idle_max, idle);
        bubble_sum += (iteration_seconds - busy) / busy;
      }
      std::printf("| %d | %d | %d | %.1f%%, %.1f%% | %.1f%% | %.1f%% |\n", P, V, M, 100.0 * idle_sum / P,
                  100.0 * idle_max, 100.0 * bubble_sum / P, 100.0 * (P - 1) / (V * M));
    }
  }
  return 0;
}
