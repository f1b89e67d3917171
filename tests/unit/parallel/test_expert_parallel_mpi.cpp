// The expert-parallel all-to-all under mpirun, the whole world one group: every (source,
// destination) pair sends its own number of rows (none for some pairs), each row valued by
// source, destination and position, so that every received row is checked exactly; the backward
// returns each gradient row to the row it came from. And the MoE layer with its experts split over
// the world (expert parallelism, the alltoall dispatcher) against the layer holding every expert
// in one process, on each rank's own tokens: outputs, input and router gradients equal; each
// local expert's gradient is the sum over every rank's single-process gradient of that expert.
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "megatron/model/moe_layer.h"
#include "megatron/parallel/expert_parallel.h"
#include "megatron/parallel/single_process_context.h"
#include "mpi_test_support.h"
#include "tensor_expect.h"

namespace megatron::parallel {
namespace {

// Rows rank `from` sends to rank `to`: 0 to 3, different for most pairs, 0 for some.
std::int64_t rows(int from, int to) { return (from * 3 + to * 2) % 4; }
double value(int from, int to, std::int64_t row) { return 1000.0 * from + 100.0 * to + row; }

TEST(ExpertAllToAll, EveryRowReachesItsRankAndItsGradientReturns) {
  Communicator& comm = testing::world();
  const auto group = comm.world();
  const int size = group->size(), me = group->rank();
  std::vector<std::int64_t> in_splits, out_splits;
  std::vector<double> sent;
  for (int to = 0; to < size; ++to) {
    in_splits.push_back(rows(me, to));
    out_splits.push_back(rows(to, me));
    for (std::int64_t r = 0; r < rows(me, to); ++r) sent.push_back(value(me, to, r));
  }
  // Rows of 3 columns: the value, twice it, and minus it.
  const at::Tensor base = at::tensor(sent, at::kDouble).view({-1, 1});
  const at::Tensor input = at::cat({base, 2 * base, -base}, 1).requires_grad_();
  const at::Tensor output = all_to_all(input, out_splits, in_splits, *group, comm);
  std::int64_t row = 0;
  for (int from = 0; from < size; ++from) {
    for (std::int64_t r = 0; r < rows(from, me); ++r, ++row) {
      const double v = value(from, me, r);
      EXPECT_EQ(output[row][0].item<double>(), v) << "row " << r << " from rank " << from;
      EXPECT_EQ(output[row][2].item<double>(), -v);
    }
  }
  ASSERT_EQ(row, output.size(0));
  // The gradient of each received row is its value + 0.5: back at the source, each row's
  // gradient is its own value + 0.5 in every column.
  output.backward(output.detach().select(1, 0).unsqueeze(1).expand({-1, 3}) + 0.5);
  EXPECT_TRUE(at::equal(input.grad(), base.expand({-1, 3}) + 0.5));
}

// EP = the world, TP = PP = 1 (DP = EP); made once (collectively).
const ParallelContext& ep_context() {
  static std::unique_ptr<ParallelState> state;
  static ParallelContext pc;
  if (!state) {
    Communicator& comm = testing::world();
    ParallelConfig config{comm.world_size(), 1, 1, 1, false, comm.world_size()};
    state = std::make_unique<ParallelState>(config, comm.rank());
    pc = ParallelContext::create(*state, comm);
  }
  return pc;
}

std::map<std::string, at::Tensor> gradients_of(const model::MoeLayer& layer) {
  ParameterList list;
  layer.collect("", list);
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, t] : list.named) out[name] = t.grad();
  return out;
}

TEST(ExpertParallelMoe, AllToAllDispatchGivesTheSingleProcessLayer) {
  const ParallelContext& pc = ep_context();
  const int ep = pc.ep->size(), rank = pc.ep->rank();
  model::ModelConfig c;
  c.num_layers = 2;
  c.hidden_size = 32;
  c.ffn_hidden_size = 48;
  c.swiglu = true;
  c.init_method_std = 0.2;
  c.moe.num_experts = 2 * ep;
  c.moe.router_topk = 2;
  c.moe.ffn_hidden_size = 24;
  c.moe.aux_loss_coeff = 1e-2;
  c.moe.z_loss_coeff = 1e-3;
  const ParameterInit init = ParameterInit(5).scope("decoder.layers.0.mlp.");
  LinearOptions options;
  options.bias = false;
  const model::MoeLayer split(c, init, pc, options);
  const model::MoeLayer whole(c, init, single_process_context(), options);
  // Each rank's own tokens, uneven across experts.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(100 + rank);
  const at::Tensor x = at::randn({6, 2, c.hidden_size}, gen);
  const at::Tensor dout = at::randn({6, 2, c.hidden_size}, gen);
  model::ForwardContext ctx{true};
  ctx.moe_aux_loss_scale = 0.25;
  const at::Tensor xs = x.clone().requires_grad_(), xw = x.clone().requires_grad_();
  const at::Tensor out = split.forward(xs, ctx).first;
  out.backward(dout);
  const at::Tensor ref = whole.forward(xw, ctx).first;
  ref.backward(dout);
  const auto tol = testing::Tolerance::of_largest(1e-6, 1e-5);
  testing::expect_close(out, ref, tol, "output");
  testing::expect_close(xs.grad(), xw.grad(), tol, "input gradient");
  const auto g = gradients_of(split), w = gradients_of(whole);
  testing::expect_close(g.at("router.weight"), w.at("router.weight"), tol, "router gradient");
  for (const char* name : {"experts.linear_fc1.weight", "experts.linear_fc2.weight"}) {
    at::Tensor summed = w.at(name).clone();  // every rank's tokens reach the experts
    Communicator& comm = *pc.comm;
    comm.all_reduce(summed, ReduceOp::kSum, *pc.ep).wait();
    ASSERT_EQ(g.at(name).size(0), 2);
    testing::expect_close(g.at(name), summed.narrow(0, 2 * rank, 2), tol, std::string(name) + " gradient");
  }
}

}  // namespace
}  // namespace megatron::parallel
