// Activation memory of one transformer layer per rank under context parallelism: the world is one
// CP group (run it under mpirun -np 1, 2, 4); each rank runs the layer's forward and backward over
// its S / CP positions with a counting CPU allocator installed, and rank 0 prints what the layer
// held after its forward (the activations kept for the backward) and the peak over forward and
// backward, above what was held before, for every rank.
//   mpirun -np CP build/tests/benchmarks/bench_cp_memory [S]      (S = 4096 by default)
// Model: a Llama-style layer (RoPE, RMSNorm, SwiGLU), hidden 1024, 16 heads over 4 query groups
// of 64 channels, FFN 2816, fp32, micro-batch 1, no dropout; the attention is the ring at CP > 1
// and LibTorch's flash attention (--attention-backend flash) at CP 1: neither holds [s, s] scores.
#include <ATen/ATen.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "counting_allocator.h"
#include "megatron/model/transformer_layer.h"
#include "megatron/parallel/communicator.h"
#include "megatron/parallel/parallel_context.h"
#include "megatron/parallel/parallel_state.h"
#include "megatron/parallel/parameter_init.h"

using namespace megatron;

int main(int argc, char** argv) {
  const auto comm = parallel::make_communicator();
  const int cp = comm->world_size();
  const std::int64_t seq = argc > 1 ? std::atoll(argv[1]) : 4096;
  const parallel::ParallelState state(parallel::ParallelConfig{cp, 1, 1, cp, false}, comm->rank());
  const parallel::ParallelContext pc = parallel::ParallelContext::create(state, *comm);

  model::ModelConfig c;
  c.num_layers = 1;
  c.hidden_size = 1024;
  c.ffn_hidden_size = 2816;
  c.num_attention_heads = 16;
  c.num_query_groups = 4;
  c.kv_channels = 64;
  c.seq_length = seq;
  c.max_position_embeddings = seq;
  c.position_embedding = model::PositionEmbedding::kRope;
  c.normalization = model::Normalization::kRmsNorm;
  c.swiglu = true;
  c.add_bias_linear = false;
  c.attention_dropout = 0.0;
  c.hidden_dropout = 0.0;
  // CP 1 through LibTorch's flash attention (no [s, s] scores), as the ring's blocks are.
  c.attention_backend = model::AttentionBackend::kFlash;
  const model::TransformerLayer layer(c, parallel::ParameterInit(1), pc, false, at::TensorOptions());
  at::manual_seed(2);
  const at::Tensor x = at::randn({seq / cp, 1, c.hidden_size}).requires_grad_();
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const model::ForwardContext ctx{true, &gen, &gen};

  std::int64_t held = 0, peak = 0;
  {
    testing::CountingAllocator counter;
    const std::int64_t base = counter.current();
    counter.reset();
    const at::Tensor y = layer.forward(x, at::Tensor(), ctx);
    held = counter.current() - base;
    y.backward(at::ones_like(y));
    peak = counter.peak_above(base);
  }
  at::Tensor mine = at::tensor({held, peak}, at::kLong);
  at::Tensor all = at::empty({2 * cp}, at::kLong);
  comm->all_gather(all, mine, *pc.world).wait();
  if (comm->rank() == 0) {
    const auto* v = all.data_ptr<std::int64_t>();
    std::int64_t max_held = 0, max_peak = 0;
    for (int r = 0; r < cp; ++r) {
      max_held = std::max(max_held, v[2 * r]);
      max_peak = std::max(max_peak, v[2 * r + 1]);
    }
    std::printf("| CP %d | S %lld, %lld per rank | held after forward %.1f MiB | peak forward + backward %.1f MiB |\n",
                cp, static_cast<long long>(seq), static_cast<long long>(seq / cp), max_held / 1048576.0,
                max_peak / 1048576.0);
  }
  return 0;
}
