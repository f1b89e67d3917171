// The expert-parallel all-to-all under mpirun, the whole world one group: every (source,
// destination) pair sends its own number of rows (none for some pairs), each row valued by
// source, destination and position, so that every received row is checked exactly; the backward
// returns each gradient row to the row it came from.
#include <gtest/gtest.h>

#include "megatron/parallel/expert_parallel.h"
#include "mpi_test_support.h"

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

}  // namespace
}  // namespace megatron::parallel
