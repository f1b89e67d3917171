// main() of the multi-rank GoogleTest binaries: makes the world communicator, runs every test on
// every rank, and agrees on the result: rank 0 prints GoogleTest's usual output, the other ranks
// print only their failures, prefixed "[rank N]", and every rank exits non-zero when any rank
// failed. A collective that hangs (a rank left a test early) fails after 120 s, naming the rank,
// group and operation, instead of hanging the test suite.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "megatron/core/check.h"
#include "mpi_test_support.h"

namespace megatron::testing {
namespace {

std::unique_ptr<parallel::Communicator> g_world;

// Failures only, with the rank: what ranks other than 0 print.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::printf("[rank %d] %s:%d: Failure\n%s\n", rank_, result.file_name() ? result.file_name() : "?",
                result.line_number(), result.message());
    std::fflush(stdout);
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed()) {
      std::printf("[rank %d] [  FAILED  ] %s.%s\n", rank_, info.test_suite_name(), info.name());
      std::fflush(stdout);
    }
  }

 private:
  int rank_;
};

}  // namespace

parallel::Communicator& world() {
  MEGATRON_ASSERT(g_world != nullptr, "the world communicator is made in main()");
  return *g_world;
}

}  // namespace megatron::testing

int main(int argc, char** argv) {
  using megatron::testing::g_world;
  ::testing::InitGoogleTest(&argc, argv);
  at::set_num_threads(1);  // several ranks share the cores
  try {
    g_world = megatron::parallel::make_communicator();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  g_world->set_timeout(std::chrono::seconds(120));
  const int rank = g_world->rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new megatron::testing::RankFailurePrinter(rank));
  }
  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  at::Tensor any = at::full({g_world->world_size()}, 0, at::kInt);
  at::Tensor mine = at::full({1}, failed, at::kInt);
  g_world->all_gather(any, mine, *g_world->world()).wait();
  if (rank == 0 && g_world->world_size() > 1) {
    std::string failed_ranks;
    for (int r = 0; r < g_world->world_size(); ++r) {
      if (any[r].item<int>() != 0) failed_ranks += (failed_ranks.empty() ? "" : ", ") + std::to_string(r);
    }
    std::printf("%d ranks: %s\n", g_world->world_size(),
                failed_ranks.empty() ? "all passed" : ("FAILED on rank(s) " + failed_ranks).c_str());
  }
  const bool any_failed = any.sum().item<int>() != 0;
  g_world.reset();
  return any_failed ? 1 : 0;
}
