// Context parallelism under mpirun, the whole world one CP group: the sequence split against
// Megatron's chunk assignment written out, and the ring attention against plain causal attention
// of the whole sequence in one process (explicit softmax(QK^T) V in float64, K/V heads repeated),
// values and gradients of q, k and v, MHA and GQA, fp32 and bf16, for the ring (p2p) and the
// all-gather.
#include <gtest/gtest.h>

#include <memory>

#include "megatron/core/check.h"
#include "megatron/parallel/context_parallel.h"
#include "megatron/parallel/parallel_state.h"
#include "mpi_test_support.h"
#include "tensor_expect.h"

namespace megatron::parallel {
namespace {

Communicator& world() { return testing::world(); }

// CP = the world, TP = PP = DP = 1; made once (collectively).
const ParallelContext& cp_context() {
  static std::unique_ptr<ParallelState> state;
  static ParallelContext pc;
  if (!state) {
    state = std::make_unique<ParallelState>(ParallelConfig{world().world_size(), 1, 1, world().world_size(), false},
                                            world().rank());
    pc = ParallelContext::create(*state, world());
  }
  return pc;
}

// Causal attention of the whole sequence: q [S, b, np, hn], k/v [S, b, ng, hn] -> [S, b, np*hn].
at::Tensor full_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale) {
  const std::int64_t s = q.size(0), heads = q.size(2), per_group = heads / k.size(2);
  const at::Tensor qh = q.permute({1, 2, 0, 3});                                 // [b, np, S, hn]
  const at::Tensor kh = k.repeat_interleave(per_group, 2).permute({1, 2, 0, 3});  // [b, np, S, hn]
  const at::Tensor vh = v.repeat_interleave(per_group, 2).permute({1, 2, 0, 3});
  const at::Tensor future = at::ones({s, s}, at::kBool).triu(1);
  const at::Tensor scores = at::matmul(qh, kh.transpose(-1, -2)).mul(scale).masked_fill(future, -1e300);
  return at::matmul(at::softmax(scores, -1), vh).permute({2, 0, 1, 3}).reshape({s, q.size(1), -1});
}

TEST(ContextParallelSplit, KeepsChunksRAnd2CpMinus1MinusR) {
  const at::Tensor t = at::arange(16);
  const auto ids = [](const at::Tensor& x) { return std::vector<std::int64_t>(x.data_ptr<std::int64_t>(), x.data_ptr<std::int64_t>() + x.numel()); };
  EXPECT_EQ(ids(cp_local_chunks(t, 0, 2, 0)), (std::vector<std::int64_t>{0, 1, 2, 3, 12, 13, 14, 15}));
  EXPECT_EQ(ids(cp_local_chunks(t, 0, 2, 1)), (std::vector<std::int64_t>{4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(ids(cp_local_chunks(t, 0, 4, 1)), (std::vector<std::int64_t>{2, 3, 12, 13}));
  EXPECT_EQ(ids(cp_local_positions(16, 4, 3, at::TensorOptions())), (std::vector<std::int64_t>{6, 7, 8, 9}));
  const at::Tensor b = at::arange(2 * 12).view({2, 12});  // [b, s]: split along the sequence dim
  EXPECT_TRUE(at::equal(cp_local_chunks(b, 1, 3, 2), at::cat({b.narrow(1, 4, 2), b.narrow(1, 6, 2)}, 1)));
  EXPECT_THROW(cp_local_chunks(at::arange(10), 0, 2, 0), Error);
  EXPECT_EQ(parse_cp_comm_type("all_gather"), CpCommType::kAllGather);
  EXPECT_THROW(parse_cp_comm_type("a2a"), Error);
}

struct Case {
  std::int64_t heads, groups;
  at::ScalarType dtype;
  CpCommType type = CpCommType::kP2P;
};

class RingAttention : public ::testing::TestWithParam<Case> {};

TEST_P(RingAttention, MatchesFullCausalAttentionAndItsGradients) {
  const Case c = GetParam();
  const ParallelContext& pc = cp_context();
  const int cp = pc.cp->size(), rank = pc.cp->rank();
  const std::int64_t s = 2 * cp * 5, b = 2, hn = 16;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hn));
  at::manual_seed(17);  // the same tensors on every rank
  const at::Tensor q = at::randn({s, b, c.heads, hn}, at::kDouble);
  const at::Tensor k = at::randn({s, b, c.groups, hn}, at::kDouble);
  const at::Tensor v = at::randn({s, b, c.groups, hn}, at::kDouble);
  const at::Tensor dout = at::randn({s, b, c.heads * hn}, at::kDouble);
  // The reference in float64 from the inputs as the dtype holds them.
  std::vector<at::Tensor> ref_in;
  for (const at::Tensor& t : {q, k, v}) ref_in.push_back(t.to(c.dtype).to(at::kDouble).requires_grad_());
  const at::Tensor ref = full_attention(ref_in[0], ref_in[1], ref_in[2], scale);
  ref.backward(dout);

  std::vector<at::Tensor> local;
  for (const at::Tensor& t : {q, k, v}) local.push_back(cp_local_chunks(t, 0, cp, rank).to(c.dtype).requires_grad_());
  const at::Tensor out = context_parallel_attention(local[0], local[1], local[2], scale, c.type, pc);
  ASSERT_EQ(out.scalar_type(), c.dtype);
  out.backward(cp_local_chunks(dout, 0, cp, rank).to(c.dtype));

  const auto tol = c.dtype == at::kFloat ? testing::Tolerance::of_largest(1e-6, 1e-5)
                                         : testing::Tolerance::of_largest(1e-3, 2e-2);
  testing::expect_close(out.to(at::kDouble), cp_local_chunks(ref, 0, cp, rank), tol, "output");
  const char* names[] = {"dq", "dk", "dv"};
  for (int i = 0; i < 3; ++i) {
    testing::expect_close(local[i].grad().to(at::kDouble), cp_local_chunks(ref_in[i].grad(), 0, cp, rank), tol,
                          names[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, RingAttention,
                         ::testing::Values(Case{4, 4, at::kFloat}, Case{4, 2, at::kFloat}, Case{4, 1, at::kFloat},
                                           Case{4, 4, at::kBFloat16}, Case{6, 2, at::kBFloat16},
                                           Case{4, 4, at::kFloat, CpCommType::kAllGather},
                                           Case{4, 1, at::kFloat, CpCommType::kAllGather},
                                           Case{6, 2, at::kBFloat16, CpCommType::kAllGather}),
                         [](const auto& info) {
                           return "np" + std::to_string(info.param.heads) + "ng" + std::to_string(info.param.groups) +
                                  (info.param.dtype == at::kFloat ? "Fp32" : "Bf16") +
                                  (info.param.type == CpCommType::kAllGather ? "AllGather" : "P2p");
                         });

}  // namespace
}  // namespace megatron::parallel
