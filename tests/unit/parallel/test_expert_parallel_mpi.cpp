// The expert-parallel exchanges under mpirun, the whole world one group: in the all-to-all every
// (source, destination) pair sends its own number of rows (none for some pairs), each row valued
// by source, destination and position, so that every received row is checked exactly, and the
// backward returns each gradient row to the row it came from; the variable-size all-gather and
// reduce-scatter likewise. And the MoE layer with its experts split over EP (EP = the world, or
// TP2 x EP with sequence parallelism, the experts split over TP2 or whole, or each split over
// expert TP 2 at TP 1), with either dispatcher, against the layer holding every
// expert in one process, on each rank's own tokens: outputs, input and router gradients equal;
// each local expert's gradient is its expert-TP shard of the sum over the expert TP x EP group of
// every rank's single-process gradient of that expert.
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

// Every rank's rows for every rank: `rows` apiece, rank j's values 10 j + row.
TEST(ExpertAllToAll, VariableAllGatherAndReduceScatterRows) {
  Communicator& comm = testing::world();
  const auto group = comm.world();
  const int size = group->size(), me = group->rank();
  std::vector<std::int64_t> sizes;
  for (int j = 0; j < size; ++j) sizes.push_back((j * 3 + 1) % 4);  // 1, 0, 3, 2, ...
  const at::Tensor mine = (at::arange(sizes[me], at::kDouble) + 10.0 * me).view({-1, 1}).repeat({1, 2}).requires_grad_();
  const at::Tensor all = all_gather_rows(mine, sizes, *group, comm);
  std::int64_t row = 0;
  for (int j = 0; j < size; ++j) {
    for (std::int64_t r = 0; r < sizes[j]; ++r, ++row) EXPECT_EQ(all[row][1].item<double>(), 10.0 * j + r);
  }
  ASSERT_EQ(row, all.size(0));
  // Backward of the gather: every rank's gradient rows (its rank + 1) summed back to the owner.
  all.backward(at::full_like(all, me + 1.0));
  EXPECT_TRUE(at::equal(mine.grad(), at::full_like(mine, size * (size + 1) / 2.0)));
  // Reduce-scatter: rank j's block of every rank's input summed at rank j.
  const at::Tensor blocks = (at::ones({row, 2}, at::kDouble) * (me + 1)).requires_grad_();
  const at::Tensor summed = reduce_scatter_rows(blocks, sizes, *group, comm);
  ASSERT_EQ(summed.size(0), sizes[me]);
  EXPECT_TRUE(at::equal(summed, at::full({sizes[me], 2}, size * (size + 1) / 2.0, at::kDouble)));
  summed.backward(at::full_like(summed, 10.0 * me));
  row = 0;  // the gradient of rank j's block is rank j's gradient
  for (int j = 0; j < size; ++j) {
    for (std::int64_t r = 0; r < sizes[j]; ++r, ++row) EXPECT_EQ(blocks.grad()[row][0].item<double>(), 10.0 * j);
  }
}

// Expert TP x EP = the world (TP x DP for the dense layers), PP = 1; made once per layout
// (collectively).
const ParallelContext& ep_context(int tp, int etp) {
  static std::map<std::pair<int, int>, std::pair<std::unique_ptr<ParallelState>, ParallelContext>> made;
  auto it = made.find({tp, etp});
  if (it == made.end()) {
    Communicator& comm = testing::world();
    ParallelConfig config{comm.world_size(), tp, 1, 1, false, comm.world_size() / etp, etp};
    auto state = std::make_unique<ParallelState>(config, comm.rank());
    ParallelContext pc = ParallelContext::create(*state, comm);
    it = made.emplace(std::make_pair(tp, etp), std::make_pair(std::move(state), pc)).first;
  }
  return it->second.second;
}

std::map<std::string, at::Tensor> gradients_of(const model::MoeLayer& layer) {
  ParameterList list;
  layer.collect("", list);
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, t] : list.named) out[name] = t.grad();
  return out;
}

struct Layout {
  model::TokenDispatcher dispatcher;
  int tp;
  int etp;  // the experts' TP size
};

class ExpertParallelMoe : public ::testing::TestWithParam<Layout> {};

// The layer with its experts split over EP (and each over TP, with sequence parallelism) against
// the layer holding every expert whole in one process, on each rank's own tokens.
TEST_P(ExpertParallelMoe, DispatchGivesTheSingleProcessLayer) {
  const int tp = GetParam().tp, etp = GetParam().etp, world = testing::world().world_size();
  if (world % tp != 0 || world % (etp == tp ? 2 * etp : etp) != 0) GTEST_SKIP() << "needs EP >= 2 at TP " << tp;
  const ParallelContext& pc = ep_context(tp, etp);
  const int ep = pc.ep->size(), ep_rank = pc.ep->rank();
  model::ModelConfig c;
  c.num_layers = 2;
  c.hidden_size = 32;
  c.ffn_hidden_size = 48;
  c.swiglu = true;
  c.init_method_std = 0.2;
  c.moe.num_experts = 2 * ep;
  c.moe.router_topk = 2;
  c.moe.ffn_hidden_size = 24;
  // Under sequence parallelism the load-balancing loss counts tokens over TP and the z-loss is
  // divided by TP (Megatron's), unlike one process given one rank's tokens: left out there (the
  // training runs compare them).
  c.moe.aux_loss_coeff = tp == 1 ? 1e-2 : 0.0;
  c.moe.z_loss_coeff = tp == 1 ? 1e-3 : 0.0;
  c.moe.token_dispatcher = GetParam().dispatcher;
  const ParameterInit init = ParameterInit(5).scope("decoder.layers.0.mlp.");
  LinearOptions options;
  options.bias = false;
  options.sequence_parallel = tp > 1;
  const model::MoeLayer split(c, init, pc, options);
  LinearOptions whole_options = options;
  whole_options.sequence_parallel = false;
  const model::MoeLayer whole(c, init, single_process_context(), whole_options);
  // Each rank's own tokens, uneven across experts.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(100 + pc.world->rank());
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
  ParameterList list;
  split.collect("", list);
  for (std::size_t i = 0; i < list.named.size(); ++i) {
    const std::string& name = list.named[i].first;
    if (!list.layouts[i].expert_parallel) continue;
    // Every rank of the expert TP x EP group sends its tokens to every expert: the expected
    // gradient is the sum of every rank's single-process one, of which this rank holds its
    // experts' expert-TP shard.
    at::Tensor summed = w.at(name).clone();
    pc.comm->all_reduce(summed, ReduceOp::kSum, *pc.tp_ep).wait();
    const at::Tensor mine =
        shard_of_full(summed.narrow(0, 2 * ep_rank, 2), list.layouts[i], pc.expert_tp->rank(), etp);
    testing::expect_close(g.at(name), mine, tol, name + " gradient");
  }
}

INSTANTIATE_TEST_SUITE_P(Dispatchers, ExpertParallelMoe,
                         ::testing::Values(Layout{model::TokenDispatcher::kAllGather, 1, 1},
                                           Layout{model::TokenDispatcher::kAllToAll, 1, 1},
                                           Layout{model::TokenDispatcher::kAllGather, 2, 2},
                                           Layout{model::TokenDispatcher::kAllToAll, 2, 2},
                                           Layout{model::TokenDispatcher::kAllGather, 2, 1},
                                           Layout{model::TokenDispatcher::kAllToAll, 2, 1},
                                           Layout{model::TokenDispatcher::kAllGather, 1, 2},
                                           Layout{model::TokenDispatcher::kAllToAll, 1, 2}),
                         [](const auto& param_info) {
                           const Layout& l = param_info.param;
                           return std::string(l.dispatcher == model::TokenDispatcher::kAllGather ? "AllGather" : "AllToAll") +
                                  "Tp" + std::to_string(l.tp) + "Etp" + std::to_string(l.etp);
                         });

}  // namespace
}  // namespace megatron::parallel
