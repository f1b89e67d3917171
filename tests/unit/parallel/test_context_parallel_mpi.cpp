// Context parallelism under mpirun, the whole world one CP group: the sequence split against
// Megatron's chunk assignment written out, and the ring attention against plain causal attention
// of the whole sequence in one process (explicit softmax(QK^T) V in float64, K/V heads repeated),
// values and gradients of q, k and v, MHA and GQA, fp32 and bf16, for the ring (p2p) and the
// all-gather. With attention dropout: values one-hot in the global key position make the output
// show each rank's mask (every entry 0 or P / (1 - p)); gathered, that mask applied to the float64
// attention gives the output and gradients of a second pass from the same generator state.
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

// The causal attention probabilities of the whole sequence, [b, np, S, S], for q [S, b, np, hn]
// and k [S, b, ng, hn].
at::Tensor full_probabilities(const at::Tensor& q, const at::Tensor& k, double scale) {
  const std::int64_t s = q.size(0), per_group = q.size(2) / k.size(2);
  const at::Tensor qh = q.permute({1, 2, 0, 3});                                 // [b, np, S, hn]
  const at::Tensor kh = k.repeat_interleave(per_group, 2).permute({1, 2, 0, 3});  // [b, np, S, hn]
  const at::Tensor future = at::ones({s, s}, at::kBool).triu(1);
  return at::softmax(at::matmul(qh, kh.transpose(-1, -2)).mul(scale).masked_fill(future, -1e300), -1);
}

// Causal attention of the whole sequence: q [S, b, np, hn], k/v [S, b, ng, hn] -> [S, b, np*hn];
// `weights` [b, np, S, S] multiplies the probabilities when defined (a scaled dropout mask).
at::Tensor full_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                          const at::Tensor& weights = {}) {
  const std::int64_t s = q.size(0), per_group = q.size(2) / k.size(2);
  const at::Tensor vh = v.repeat_interleave(per_group, 2).permute({1, 2, 0, 3});  // [b, np, S, hn]
  at::Tensor probs = full_probabilities(q, k, scale);
  if (weights.defined()) probs = probs * weights;
  return at::matmul(probs, vh).permute({2, 0, 1, 3}).reshape({s, q.size(1), -1});
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

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return "np" + std::to_string(info.param.heads) + "ng" + std::to_string(info.param.groups) +
         (info.param.dtype == at::kFloat ? "Fp32" : "Bf16") +
         (info.param.type == CpCommType::kAllGather ? "AllGather" : "P2p");
}

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
  const at::Tensor out = context_parallel_attention(local[0], local[1], local[2], scale, 0.0, c.type, pc);
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
                         case_name);

class RingAttentionDropout : public ::testing::TestWithParam<Case> {};

TEST_P(RingAttentionDropout, MasksEveryBlockAndRedrawsTheMasksInTheBackward) {
  const Case c = GetParam();
  const ParallelContext& pc = cp_context();
  const int cp = pc.cp->size(), rank = pc.cp->rank();
  const std::int64_t s = 2 * cp * 4, b = 2, hn = s;  // hn >= S: one-hot values show every key's weight
  const double scale = 1.0 / std::sqrt(static_cast<double>(hn)), p = 0.2;
  at::manual_seed(23);  // the same tensors on every rank
  const auto as_dtype = [&](const at::Tensor& t) { return t.to(c.dtype).to(at::kDouble); };
  const at::Tensor q = as_dtype(at::randn({s, b, c.heads, hn}, at::kDouble));
  const at::Tensor k = as_dtype(at::randn({s, b, c.groups, hn}, at::kDouble));
  const at::Tensor v = as_dtype(at::randn({s, b, c.groups, hn}, at::kDouble));
  const at::Tensor dout = as_dtype(at::randn({s, b, c.heads * hn}, at::kDouble));
  const at::Tensor one_hot = at::eye(s, hn, at::kDouble).view({s, 1, 1, hn}).expand({s, b, c.groups, hn});
  const auto local = [&](const at::Tensor& t) { return cp_local_chunks(t, 0, cp, rank).to(c.dtype).contiguous(); };
  at::Generator gen = at::globalContext().defaultGenerator(at::kCPU);
  gen.set_current_seed(31);
  const at::Tensor start = gen.get_state();

  // Pass 1: out[i, h, j] = P_ij keep_ij / (1 - p) for global key j.
  const std::int64_t rows = s / cp;
  const at::Tensor shown = context_parallel_attention(local(q), local(k), local(one_hot), scale, p, c.type, pc)
                               .to(at::kDouble)
                               .view({rows, b, c.heads, hn})
                               .narrow(3, 0, s);  // [s_local, b, np, S]
  at::Tensor gathered = at::empty({cp, rows, b, c.heads, s}, at::kDouble);
  pc.comm->all_gather(gathered, (shown != 0).to(at::kDouble).contiguous(), *pc.cp).wait();
  at::Tensor kept = at::empty({s, b, c.heads, s}, at::kDouble);  // rows in sequence order
  for (int j = 0; j < cp; ++j) kept.index_copy_(0, cp_local_positions(s, cp, j, at::TensorOptions()), gathered[j]);
  const at::Tensor weights = kept.permute({1, 2, 0, 3}) / (1.0 - p);  // [b, np, S, S]
  const at::Tensor visible = at::ones({s, s}, at::kBool).tril().expand({b, c.heads, s, s});
  const double draws = static_cast<double>(visible.sum().item<std::int64_t>());
  EXPECT_NEAR(kept.permute({1, 2, 0, 3}).masked_select(visible).sum().item<double>() / draws, 1.0 - p,
              5 * std::sqrt(p * (1 - p) / draws))
      << "kept fraction";
  EXPECT_EQ(kept.permute({1, 2, 0, 3}).masked_select(visible.logical_not()).sum().item<double>(), 0.0)
      << "a future key was seen";
  const auto tol = c.dtype == at::kFloat ? testing::Tolerance::of_largest(1e-6, 1e-5)
                                         : testing::Tolerance::of_largest(1e-3, 2e-2);
  const at::Tensor probs = (full_probabilities(q, k, scale) * weights).permute({2, 0, 1, 3});  // [S, b, np, S]
  testing::expect_close(shown, cp_local_chunks(probs, 0, cp, rank), tol, "one-hot output = P * keep / (1 - p)");

  // Pass 2 from the same generator state: the same masks, here with random values and gradients.
  gen.set_state(start);
  std::vector<at::Tensor> ref_in, in;
  for (const at::Tensor& t : {q, k, v}) {
    ref_in.push_back(t.clone().requires_grad_());
    in.push_back(local(t).requires_grad_());
  }
  const at::Tensor ref = full_attention(ref_in[0], ref_in[1], ref_in[2], scale, weights);
  ref.backward(dout);
  const at::Tensor out = context_parallel_attention(in[0], in[1], in[2], scale, p, c.type, pc);
  out.backward(local(dout));
  testing::expect_close(out.to(at::kDouble), cp_local_chunks(ref, 0, cp, rank), tol, "output");
  const char* names[] = {"dq", "dk", "dv"};
  for (int i = 0; i < 3; ++i) {
    testing::expect_close(in[i].grad().to(at::kDouble), cp_local_chunks(ref_in[i].grad(), 0, cp, rank), tol, names[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, RingAttentionDropout,
                         ::testing::Values(Case{4, 4, at::kFloat}, Case{4, 2, at::kFloat}, Case{4, 4, at::kBFloat16},
                                           Case{4, 1, at::kFloat, CpCommType::kAllGather},
                                           Case{6, 2, at::kFloat, CpCommType::kAllGather}),
                         case_name);

}  // namespace
}  // namespace megatron::parallel
