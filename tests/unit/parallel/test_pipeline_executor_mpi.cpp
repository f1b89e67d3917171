// The pipeline executor under mpirun, one stage per rank (2, 4 and 8 stages), 1F1B over 8
// micro-batches of a chain of scalar multiplications: stage s computes x * w_s, so every stage's
// output is a fresh activation its backward does not need (MulBackward keeps the input and w).
// - The gradients are the analytic ones: d loss / d w_s = (product of the other w) x sum of x.
// - Memory: an output sent to the next stage keeps only its autograd node (Megatron's
//   deallocate_output_tensor), so the first stage, which holds P micro-batches in flight, peaks
//   near P saved inputs, not P inputs plus P outputs (counted by a CPU allocator).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "counting_allocator.h"
#include "megatron/parallel/parallel_context.h"
#include "megatron/parallel/parallel_state.h"
#include "megatron/parallel/pipeline_executor.h"
#include "mpi_test_support.h"

namespace megatron::parallel {
namespace {

constexpr std::int64_t kElements = 1 << 18;  // 1 MiB of fp32 per activation
constexpr int kMicrobatches = 8;

double weight_of(int stage) { return 1.0 + 0.125 * stage; }
double input_value(int microbatch) { return 0.5 + microbatch; }

TEST(PipelineExecutorMpi, SentOutputsKeepOnlyTheirGraphAndGradientsAreExact) {
  Communicator& world = testing::world();
  const int stages = world.world_size();
  if (stages < 2) GTEST_SKIP() << "needs a pipeline of 2 or more ranks (mpirun)";
  const ParallelState state(ParallelConfig{stages, 1, stages, 1, false}, world.rank());
  const ParallelContext pc = ParallelContext::create(state, world);
  const int stage = state.pp_rank();
  at::Tensor w = at::full({}, weight_of(stage)).requires_grad_(true);

  PipelineSteps steps;
  steps.forward = [&](int microbatch, int, const at::Tensor& input) {
    const at::Tensor x = input.defined() ? input : at::full({kElements}, input_value(microbatch));
    const at::Tensor y = x * w;
    return stage == stages - 1 ? y.sum() : y;
  };
  PipelineExecutor executor(pc, PipelineShape{stages, 1, kMicrobatches, 0}, {kElements}, at::TensorOptions());
  testing::CountingAllocator counter;
  const std::int64_t base = counter.current();
  executor.train(steps);
  const std::int64_t peak = counter.peak_above(base);

  // d/dw_s of sum over micro-batches of sum(x_mb) * prod(w) = prod_{t != s} w_t * sum_mb sum(x_mb).
  double others = 1.0, inputs = 0.0;
  for (int t = 0; t < stages; ++t) {
    if (t != stage) others *= weight_of(t);
  }
  for (int mb = 0; mb < kMicrobatches; ++mb) inputs += input_value(mb) * kElements;
  ASSERT_TRUE(w.grad().defined());
  EXPECT_NEAR(w.grad().item<double>(), others * inputs, 1e-6 * others * inputs) << "stage " << stage;

  if (stage == 0) {
    // 1F1B's first stage holds P micro-batches (its P - 1 warm-up forwards and the first
    // steady one): P saved inputs, plus two activations of working memory (the step's output or
    // the received gradient, and the backward's x * grad), plus the released outputs' one-element
    // storages. Measured: P + 2 activations; 2P + 2 when sent outputs kept their data (and sends
    // lingered until the peer had taken them).
    const std::int64_t activation = kElements * 4;
    std::printf("[ stage 0 of %d ] peak %.2f MiB above the start (%lld activations of 1 MiB)\n", stages,
                static_cast<double>(peak) / (1 << 20), static_cast<long long>(peak / activation));
    EXPECT_LE(peak, (stages + 2) * activation + 4096) << "sent outputs still hold their data";
  }
}

}  // namespace
}  // namespace megatron::parallel
