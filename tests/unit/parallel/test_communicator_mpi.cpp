// The communicator under mpirun (2 and 4 ranks) on the groups ParallelContext makes: every
// collective with rank-valued inputs against the answer computed from the rank lists, exactly;
// asynchronous operations in flight together; bf16 reductions; send/recv around a ring; the
// timeout naming the rank, group and operation; operations abandoned, not waited for, while an
// error unwinds; and the single-process communicator's semantics.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "megatron/core/check.h"
#include "megatron/parallel/c10d_store.h"
#include "megatron/parallel/nccl_communicator.h"
#include "megatron/parallel/parallel_context.h"
#include "mpi_test_support.h"

namespace megatron::parallel {
namespace {

Communicator& world() { return testing::world(); }

// TP 2 when the world is even (4 ranks: TP 2 x DP 2), else TP 1.
const ParallelContext& context() {
  static std::unique_ptr<ParallelState> state;
  static ParallelContext pc;
  if (!state) {
    const int tp = world().world_size() % 2 == 0 ? 2 : 1;
    state = std::make_unique<ParallelState>(ParallelConfig{world().world_size(), tp, 1, 1, false}, world().rank());
    pc = ParallelContext::create(*state, world());
  }
  return pc;
}

std::vector<const ProcessGroup*> groups() {
  const ParallelContext& pc = context();
  return {pc.world.get(), pc.tp.get(), pc.dp.get(), pc.dp_cp.get(), pc.mp.get()};
}

// A tensor of `n` values rank * 1000 + i.
at::Tensor rank_values(int rank, std::int64_t n, at::ScalarType type = at::kFloat) {
  return (at::arange(n, at::kDouble) + rank * 1000.0).to(type);
}

TEST(Communicator, GroupsMatchParallelState) {
  const ParallelContext& pc = context();
  EXPECT_EQ(pc.tp->ranks(), pc.state->tp_group());
  EXPECT_EQ(pc.dp->ranks(), pc.state->dp_group());
  EXPECT_EQ(pc.mp->ranks(), pc.state->model_parallel_group());
  EXPECT_EQ(pc.tp->rank(), pc.state->tp_rank());
  EXPECT_EQ(pc.dp->rank(), pc.state->dp_rank());
  EXPECT_EQ(pc.world->size(), world().world_size());
}

TEST(Communicator, AllReduceSumAndMaxOnEveryGroup) {
  for (const ProcessGroup* g : groups()) {
    for (at::ScalarType type : {at::kFloat, at::kDouble, at::kLong, at::kInt}) {
      at::Tensor t = rank_values(world().rank(), 5, type);
      world().all_reduce(t, ReduceOp::kSum, *g).wait();
      at::Tensor want = at::zeros({5}, at::kDouble);
      for (int r : g->ranks()) want += rank_values(r, 5, at::kDouble);
      EXPECT_TRUE(at::equal(t, want.to(type))) << g->describe() << " " << type << " " << t;

      at::Tensor m = rank_values(world().rank(), 3, type);
      world().all_reduce(m, ReduceOp::kMax, *g).wait();
      int top = 0;
      for (int r : g->ranks()) top = std::max(top, r);
      EXPECT_TRUE(at::equal(m, rank_values(top, 3, type))) << g->describe();
    }
  }
}

TEST(Communicator, AllGatherConcatenatesInGroupOrder) {
  for (const ProcessGroup* g : groups()) {
    const at::Tensor input = rank_values(world().rank(), 4).view({2, 2});
    at::Tensor output = at::empty({2 * g->size(), 2});
    world().all_gather(output, input, *g).wait();
    std::vector<at::Tensor> parts;
    for (int r : g->ranks()) parts.push_back(rank_values(r, 4).view({2, 2}));
    EXPECT_TRUE(at::equal(output, at::cat(parts))) << g->describe();
  }
}

TEST(Communicator, ReduceScatterGivesEachRankItsBlockOfTheSum) {
  for (const ProcessGroup* g : groups()) {
    const std::int64_t block = 3;
    const at::Tensor input = rank_values(world().rank(), block * g->size());
    at::Tensor output = at::empty({block});
    world().reduce_scatter(output, input, *g).wait();
    at::Tensor sum = at::zeros({block * g->size()});
    for (int r : g->ranks()) sum += rank_values(r, block * g->size());
    EXPECT_TRUE(at::equal(output, sum.narrow(0, block * g->rank(), block))) << g->describe();
  }
}

TEST(Communicator, BroadcastFromEveryRoot) {
  for (const ProcessGroup* g : groups()) {
    for (int root = 0; root < g->size(); ++root) {
      at::Tensor t = rank_values(world().rank(), 6, at::kLong);
      world().broadcast(t, root, *g).wait();
      EXPECT_TRUE(at::equal(t, rank_values(g->ranks()[static_cast<std::size_t>(root)], 6, at::kLong)));
    }
  }
}

TEST(Communicator, SendRecvAroundTheRing) {
  const ProcessGroup& g = *world().world();
  const int next = (g.rank() + 1) % g.size(), prev = (g.rank() + g.size() - 1) % g.size();
  const at::Tensor out = rank_values(world().rank(), 7);
  at::Tensor in = at::empty({7});
  Work recv = world().recv(in, prev, g);
  Work send = world().send(out, next, g);
  send.wait();
  recv.wait();
  EXPECT_TRUE(at::equal(in, rank_values(g.ranks()[static_cast<std::size_t>(prev)], 7)));
}

TEST(Communicator, ManyAsynchronousOperationsInFlight) {
  const ParallelContext& pc = context();
  std::vector<at::Tensor> tensors;
  std::vector<Work> works;
  for (int i = 0; i < 8; ++i) {
    tensors.push_back(rank_values(world().rank(), 1000 + i));
    works.push_back(world().all_reduce(tensors.back(), ReduceOp::kSum, i % 2 ? *pc.dp : *pc.tp));
  }
  for (auto it = works.rbegin(); it != works.rend(); ++it) it->wait();
  for (int i = 0; i < 8; ++i) {
    const ProcessGroup& g = i % 2 ? *pc.dp : *pc.tp;
    at::Tensor want = at::zeros({1000 + i});
    for (int r : g.ranks()) want += rank_values(r, 1000 + i);
    EXPECT_TRUE(at::equal(tensors[static_cast<std::size_t>(i)], want)) << i;
  }
}

TEST(Communicator, BFloat16ReductionsRunInFloat) {
  const ProcessGroup& g = *world().world();
  // Small integers are exact in bf16.
  at::Tensor t = at::full({9}, world().rank() + 1, at::kBFloat16);
  world().all_reduce(t, ReduceOp::kSum, g).wait();
  EXPECT_TRUE(at::equal(t, at::full({9}, g.size() * (g.size() + 1) / 2, at::kBFloat16)));
  const at::Tensor input = at::full({2 * g.size()}, world().rank() + 1, at::kBFloat16);
  at::Tensor output = at::empty({2}, at::kBFloat16);
  world().reduce_scatter(output, input, g).wait();
  EXPECT_TRUE(at::equal(output, at::full({2}, g.size() * (g.size() + 1) / 2, at::kBFloat16)));
}

TEST(Communicator, TimeoutNamesRankGroupAndOperation) {
  if (world().world_size() < 2) GTEST_SKIP() << "needs mpirun with 2 or more ranks";
  const ParallelContext& pc = context();
  world().set_timeout(std::chrono::milliseconds(300));
  // Rank 0 waits for a message nobody sends yet; the others do nothing.
  static at::Tensor t = at::empty({1});  // outlives the abandoned receive
  if (world().rank() == 0) {
    Work w = world().recv(t, 1, *pc.world);
    try {
      w.wait();
      ADD_FAILURE() << "the receive completed";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("[rank 0] recv from rank 1 on the world group (ranks 0, 1"), std::string::npos) << what;
      EXPECT_NE(what.find("did not complete within 0.3 s (--distributed-timeout-minutes)"), std::string::npos) << what;
    }
    // The receive is still posted (its buffer `t` stays alive): rank 1 satisfies it below.
    world().set_timeout(std::chrono::seconds(120));
    world().barrier(*pc.world).wait();
  } else {
    world().set_timeout(std::chrono::seconds(120));
    world().barrier(*pc.world).wait();
    if (world().rank() == 1) {
      at::Tensor one = at::ones({1});
      world().send(one, 0, *pc.world).wait();
    }
  }
  world().barrier(*pc.world).wait();
}

TEST(Communicator, WorkIsAbandonedNotWaitedForWhileAnErrorUnwinds) {
  if (world().world_size() < 2) GTEST_SKIP() << "needs mpirun with 2 or more ranks";
  const ParallelContext& pc = context();
  world().set_timeout(std::chrono::seconds(30));
  if (world().rank() == 0) {
    const auto start = std::chrono::steady_clock::now();
    try {
      at::Tensor t = at::empty({4});  // kept alive by the abandoned receive, which rank 1 satisfies below
      Work pending = world().recv(t, 1, *pc.world);
      throw Error("an error while a receive is in flight");
    } catch (const Error&) {
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 5.0) << "the unwinding waited for the pending receive";
  }
  world().barrier(*pc.world).wait();
  if (world().rank() == 1) {
    at::Tensor four = at::full({4}, 4.0);
    world().send(four, 0, *pc.world).wait();
  }
  world().set_timeout(std::chrono::seconds(120));
  world().barrier(*pc.world).wait();
}

// The NCCL communicator's rendezvous, which runs on CPU: rank 0 serves a TCPStore, its address goes
// over MPI, and every rank reads what every other rank wrote.
TEST(NcclRendezvous, TcpStoreReachesEveryRank) {
  StoreAddress address;
  const auto store = make_world_store(world(), std::chrono::seconds(60), &address);
  EXPECT_GT(address.port, 0);
  const int me = world().rank();
  store->set("rank/" + std::to_string(me), std::vector<uint8_t>{static_cast<uint8_t>(me), 42});
  for (int r = 0; r < world().world_size(); ++r) {
    const std::vector<uint8_t> value = store->get("rank/" + std::to_string(r));  // waits until set
    EXPECT_EQ(value, (std::vector<uint8_t>{static_cast<uint8_t>(r), 42})) << "from rank " << r;
  }
  world().barrier(*world().world()).wait();  // nobody leaves while others still read from the server
}

TEST(NcclRendezvous, TheNcclBackendIsLinkedInCudaBuilds) {
#if defined(USE_C10D_NCCL)
  EXPECT_TRUE(nccl_available());
#else
  EXPECT_FALSE(nccl_available());
#endif
}

TEST(SingleProcessCommunicator, CollectivesOnOneRank) {
  const auto comm = make_single_process_communicator();
  const ParallelState state(ParallelConfig{}, 0);
  const ParallelContext pc = ParallelContext::create(state, *comm);
  EXPECT_EQ(comm->world_size(), 1);
  EXPECT_EQ(comm->backend(), "single process");
  at::Tensor t = at::arange(4, at::kFloat);
  comm->all_reduce(t, ReduceOp::kSum, *pc.dp).wait();
  EXPECT_TRUE(at::equal(t, at::arange(4, at::kFloat)));
  at::Tensor gathered = at::empty({4});
  comm->all_gather(gathered, t, *pc.tp).wait();
  EXPECT_TRUE(at::equal(gathered, t));
  const at::Tensor sent = at::full({3}, 7.0);
  comm->send(sent, 0, *pc.world).wait();
  at::Tensor received = at::empty({3});
  comm->recv(received, 0, *pc.world).wait();
  EXPECT_TRUE(at::equal(received, sent));
  EXPECT_THROW(comm->recv(received, 0, *pc.world).wait(), Error);
}

}  // namespace
}  // namespace megatron::parallel
