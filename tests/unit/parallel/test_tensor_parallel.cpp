// Tensor and sequence parallelism under mpirun (2, 4 and 8 ranks; TP 2 and, with 4 or 8 ranks, TP 4):
// each region's forward and backward against its definition with rank-valued inputs (exact);
// the layers and the vocab-parallel cross entropy against dense ATen on the full tensors (outputs
// and every gradient, each rank's shard of the dense weight gradient); whole GPT models against
// the single-process model built in the same process from the same seed (loss and every
// gathered gradient within 1e-5, gathered initial weights bit for bit).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/tiny_model_config.h"
#include "megatron/core/check.h"
#include "megatron/model/gpt_model.h"
#include "megatron/parallel/single_process_context.h"
#include "megatron/parallel/tensor_parallel.h"
#include "mpi_test_support.h"
#include "tensor_expect.h"

namespace megatron::parallel {
namespace {

Communicator& world() { return testing::world(); }

// The TP x DP layout of the world with TP size `tp`, made once per size (collectively).
const ParallelContext& context(int tp) {
  struct Layout {
    std::unique_ptr<ParallelState> state;
    ParallelContext pc;
  };
  static std::map<int, Layout> layouts;
  Layout& layout = layouts[tp];
  if (!layout.state) {
    layout.state = std::make_unique<ParallelState>(ParallelConfig{world().world_size(), tp, 1, 1, false}, world().rank());
    layout.pc = ParallelContext::create(*layout.state, world());
  }
  return layout.pc;
}

// TP 2 and TP 4 where the world divides by them (4 ranks: TP 2 x DP 2, then TP 4; 8 ranks:
// TP 2 x DP 4, then TP 4 x DP 2). The test models have 4 query groups, so TP stops at 4.
std::vector<int> tp_sizes() {
  std::vector<int> sizes;
  for (int tp : {2, 4}) {
    if (world().world_size() % tp == 0) sizes.push_back(tp);
  }
  return sizes;
}

#define FOR_EACH_TP(tp)                                                           \
  if (tp_sizes().empty()) GTEST_SKIP() << "needs mpirun with 2 or more ranks";  \
  for (int tp : tp_sizes())

at::Generator generator(std::uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

at::Tensor seeded_randn(at::IntArrayRef shape, std::uint64_t seed) {
  at::Generator gen = generator(seed);
  return at::randn(shape, gen);
}

at::Tensor chunk_of(const at::Tensor& full, std::int64_t dim, const ParallelContext& pc) {
  return full.chunk(tp_size(pc), dim)[tp_rank(pc)].contiguous();
}

at::Tensor filled(at::IntArrayRef shape, double value) { return at::full(shape, value, at::kFloat); }

using testing::expect_close;
using testing::expect_equal;
using testing::Tolerance;

// Every TP rank's copy of `local`, in TP rank order.
std::vector<at::Tensor> all_gather(const at::Tensor& local, const ParallelContext& pc) {
  const at::Tensor input = local.detach().contiguous();
  at::Tensor output = at::empty({tp_size(pc) * input.numel()}, input.options());
  pc.comm->all_gather(output, input, *pc.tp).wait();
  std::vector<at::Tensor> copies;
  for (const auto& piece : output.chunk(tp_size(pc))) copies.push_back(piece.view(input.sizes()));
  return copies;
}

// The full tensor from this TP group's shards; replicated tensors must be equal on every rank.
at::Tensor gather_full(const at::Tensor& local, const TensorParallelLayout& layout, const ParallelContext& pc,
                       const std::string& what) {
  const auto copies = all_gather(local, pc);
  if (layout.sharded()) return full_from_shards(copies, layout);
  for (const auto& copy : copies) expect_equal(copy, copies.front(), what + " replicated over TP");
  return copies.front().clone();
}

at::Tensor sum_over_tp(const at::Tensor& t, const ParallelContext& pc) {
  at::Tensor sum = t.detach().clone();
  pc.comm->all_reduce(sum, ReduceOp::kSum, *pc.tp).wait();
  return sum;
}

// ---------------------------------------------------------------------------------------------
// Regions: rank-valued inputs, exact answers.

TEST(TensorParallelRegions, CopyToIsIdentityForwardAndAllReduceBackward) {
  FOR_EACH_TP(tp) {
    const ParallelContext& pc = context(tp);
    const int r = tp_rank(pc);
    const at::Tensor x = at::arange(6, at::kFloat).view({2, 3}).requires_grad_();
    const at::Tensor y = copy_to_tensor_parallel_region(x, pc);
    expect_equal(y, x, "forward");
    y.backward(filled({2, 3}, r + 1));
    expect_equal(x.grad(), filled({2, 3}, tp * (tp + 1) / 2), "backward");
  }
}

TEST(TensorParallelRegions, ReduceFromIsAllReduceForwardAndIdentityBackward) {
  FOR_EACH_TP(tp) {
    const ParallelContext& pc = context(tp);
    const int r = tp_rank(pc);
    const at::Tensor base = at::arange(6, at::kFloat).view({2, 3});
    const at::Tensor x = (base + 10 * r).requires_grad_();
    const at::Tensor y = reduce_from_tensor_parallel_region(x, pc);
    expect_equal(y, base * tp + 10 * tp * (tp - 1) / 2, "forward");
    expect_equal(x, base + 10 * r, "input left unchanged");
    y.backward(base * (r + 1));
    expect_equal(x.grad(), base * (r + 1), "backward");
  }
}

TEST(TensorParallelRegions, ScatterToKeepsOwnLastDimChunkAndGathersBackward) {
  FOR_EACH_TP(tp) {
    const ParallelContext& pc = context(tp);
    const int r = tp_rank(pc);
    const at::Tensor x = at::arange(2 * 3 * 4 * tp, at::kFloat).view({2, 3, 4 * tp}).requires_grad_();
    const at::Tensor y = scatter_to_tensor_parallel_region(x, pc);
    expect_equal(y, x.narrow(-1, 4 * r, 4), "forward");
    y.backward(filled({2, 3, 4}, r + 1));
    std::vector<at::Tensor> expected;
    for (int q = 0; q < tp; ++q) expected.push_back(filled({2, 3, 4}, q + 1));
    expect_equal(x.grad(), at::cat(expected, -1), "backward");
  }
}

TEST(TensorParallelRegions, GatherFromAllGathersLastDimAndSplitsBackward) {
  FOR_EACH_TP(tp) {
    const ParallelContext& pc = context(tp);
    const int r = tp_rank(pc);
    const at::Tensor base = at::arange(2 * 3 * 4, at::kFloat).view({2, 3, 4});
    const at::Tensor x = (base + 100 * r).requires_grad_();
    const at::Tensor y = gather_from_tensor_parallel_region(x, pc);
    std::vector<at::Tensor> expected;
    for (int q = 0; q < tp; ++q) expected.push_back(base + 100 * q);
    expect_equal(y, at::cat(expected, -1), "forward");
    const at::Tensor grad = at::arange(2 * 3 * 4 * tp, at::kFloat).view({2, 3, 4 * tp});
    y.backward(grad);
    expect_equal(x.grad(), grad.narrow(-1, 4 * r, 4), "backward");
  }
}

TEST(TensorParallelRegions, ScatterToSequenceParallelKeepsOwnRowsAndGathersBackward) {
  FOR_EACH_TP(tp) {
    const ParallelContext& pc = context(tp);
    const int r = tp_rank(pc);
    const at::Tensor x = at::arange(4 * tp * 2 * 3, at::kFloat).view({4 * tp, 2, 3}).requires_grad_();
    const at::Tensor y = scatter_to_sequence_parallel_region(x, pc);
    expect_equal(y, x.narrow(0, 4 * r, 4), "forward");
    y.backward(filled({4, 2, 3}, r + 1));
    std::vector<at::Tensor> expected;
    for (int q = 0; q < tp; ++q) expected.push_back(filled({4, 2, 3}, q + 1));
    expect_equal(x.grad(), at::cat(expected, 0), "backward");
  }
}

TEST(TensorParallelRegions, GatherFromSequenceParallelAllGathersRowsAndReduceScattersBackward) {
  FOR_EACH_TP(tp) {
    const ParallelContext& pc = context(tp);
    const int r = tp_rank(pc);
    const at::Tensor base = at::arange(4 * 2 * 3, at::kFloat).view({4, 2, 3});
    const at::Tensor x = (base + 100 * r).requires_grad_();
    const at::Tensor y = gather_from_sequence_parallel_region(x, pc);
    std::vector<at::Tensor> expected;
    for (int q = 0; q < tp; ++q) expected.push_back(base + 100 * q);
    expect_equal(y, at::cat(expected, 0), "forward");
    const at::Tensor grad = at::arange(4 * tp * 2 * 3, at::kFloat).view({4 * tp, 2, 3});
    y.backward(grad * (r + 1));
    expect_equal(x.grad(), grad.narrow(0, 4 * r, 4) * (tp * (tp + 1) / 2), "backward");
  }
}

TEST(TensorParallelRegions, ReduceScatterToSequenceParallelSumsOwnRowsAndGathersBackward) {
  FOR_EACH_TP(tp) {
    const ParallelContext& pc = context(tp);
    const int r = tp_rank(pc);
    const at::Tensor base = at::arange(4 * tp * 2 * 3, at::kFloat).view({4 * tp, 2, 3});
    const at::Tensor x = (base + 100 * r).requires_grad_();
    const at::Tensor y = reduce_scatter_to_sequence_parallel_region(x, pc);
    expect_equal(y, (base * tp + 100 * tp * (tp - 1) / 2).narrow(0, 4 * r, 4), "forward");
    y.backward(filled({4, 2, 3}, r + 1));
    std::vector<at::Tensor> expected;
    for (int q = 0; q < tp; ++q) expected.push_back(filled({4, 2, 3}, q + 1));
    expect_equal(x.grad(), at::cat(expected, 0), "backward");
  }
}

TEST(TensorParallelRegions, AreIdentitiesAtTpOne) {
  const ParallelContext& pc = single_process_context();
  const at::Tensor x = at::arange(6, at::kFloat).view({2, 3}).requires_grad_();
  for (auto* region : {copy_to_tensor_parallel_region, reduce_from_tensor_parallel_region,
                       scatter_to_tensor_parallel_region, gather_from_tensor_parallel_region,
                       scatter_to_sequence_parallel_region, gather_from_sequence_parallel_region,
                       reduce_scatter_to_sequence_parallel_region}) {
    expect_equal(region(x, pc), x, "forward");
  }
}

// ---------------------------------------------------------------------------------------------
// Layers against dense ATen on the full tensors.

constexpr std::int64_t kSeq = 8, kBatch = 3;
// Largest difference at most 1e-6 times the largest reference magnitude (plus a tiny floor).
const Tolerance kLayerTolerance = Tolerance::of_largest(1e-12, 1e-6);

void check_column_parallel_linear(int tp, bool gather_output, bool sequence_parallel) {
  const ParallelContext& pc = context(tp);
  const std::string what = "TP " + std::to_string(tp) + (gather_output ? " gather_output" : "") +
                           (sequence_parallel ? " sequence parallel" : "");
  const int in = 6, out = 8;
  const parallel::ParameterInit gen(21);
  LinearOptions options;
  options.gather_output = gather_output;
  options.sequence_parallel = sequence_parallel;
  const ColumnParallelLinear layer(in, out, 0.5, gen, pc, options);
  ParameterList params;
  layer.collect("", params);

  const parallel::ParameterInit ref_gen(21);
  const at::Tensor weight = ref_gen.full("weight", {out, in}, 0.5).requires_grad_();
  const at::Tensor bias = at::zeros({out}).requires_grad_();
  expect_equal(params.named[0].second, chunk_of(weight, 0, pc), what + " weight shard");

  const at::Tensor x_full = seeded_randn({kSeq, kBatch, in}, 22), grad_full = seeded_randn({kSeq, kBatch, out}, 23);
  const at::Tensor x = (sequence_parallel ? chunk_of(x_full, 0, pc) : x_full.clone()).requires_grad_();
  const at::Tensor y = layer.forward(x);
  const at::Tensor x_ref = x_full.clone().requires_grad_();
  const at::Tensor y_ref = at::linear(x_ref, weight, bias);
  expect_close(y, gather_output ? y_ref : chunk_of(y_ref, -1, pc), kLayerTolerance, what + " output");

  (y * (gather_output ? grad_full : chunk_of(grad_full, -1, pc))).sum().backward();
  (y_ref * grad_full).sum().backward();
  expect_close(x.grad(), sequence_parallel ? chunk_of(x_ref.grad(), 0, pc) : x_ref.grad(), kLayerTolerance,
               what + " input grad");
  expect_close(params.named[0].second.grad(), chunk_of(weight.grad(), 0, pc), kLayerTolerance, what + " weight grad");
  expect_close(params.named[1].second.grad(), chunk_of(bias.grad(), 0, pc), kLayerTolerance, what + " bias grad");
  EXPECT_EQ(params.layouts[0].partition_dim, 0);
  EXPECT_EQ(params.layouts[1].partition_dim, 0);
}

TEST(ColumnParallelLinear, MatchesDense) {
  FOR_EACH_TP(tp) check_column_parallel_linear(tp, false, false);
}
TEST(ColumnParallelLinear, MatchesDenseWithGatherOutput) {
  FOR_EACH_TP(tp) check_column_parallel_linear(tp, true, false);
}
TEST(ColumnParallelLinear, MatchesDenseWithSequenceParallel) {
  FOR_EACH_TP(tp) check_column_parallel_linear(tp, false, true);
}

void check_row_parallel_linear(int tp, bool input_is_parallel, bool sequence_parallel) {
  const ParallelContext& pc = context(tp);
  const std::string what = "TP " + std::to_string(tp) + (input_is_parallel ? " parallel input" : " full input") +
                           (sequence_parallel ? " sequence parallel" : "");
  const int in = 8, out = 6;
  const parallel::ParameterInit gen(31);
  LinearOptions options;
  options.input_is_parallel = input_is_parallel;
  options.sequence_parallel = sequence_parallel;
  const RowParallelLinear layer(in, out, 0.5, gen, pc, options);
  ParameterList params;
  layer.collect("", params);

  const parallel::ParameterInit ref_gen(31);
  const at::Tensor weight = ref_gen.full("weight", {out, in}, 0.5).requires_grad_();
  const at::Tensor bias = at::zeros({out}).requires_grad_();
  expect_equal(params.named[0].second, chunk_of(weight, 1, pc), what + " weight shard");

  const at::Tensor x_full = seeded_randn({kSeq, kBatch, in}, 32), grad_full = seeded_randn({kSeq, kBatch, out}, 33);
  const at::Tensor x = (input_is_parallel ? chunk_of(x_full, -1, pc) : x_full.clone()).requires_grad_();
  const at::Tensor y = layer.forward(x) + layer.bias();
  const at::Tensor x_ref = x_full.clone().requires_grad_();
  const at::Tensor y_ref = at::linear(x_ref, weight, bias);
  expect_close(y, sequence_parallel ? chunk_of(y_ref, 0, pc) : y_ref, kLayerTolerance, what + " output");

  (y * (sequence_parallel ? chunk_of(grad_full, 0, pc) : grad_full)).sum().backward();
  (y_ref * grad_full).sum().backward();
  expect_close(x.grad(), input_is_parallel ? chunk_of(x_ref.grad(), -1, pc) : x_ref.grad(), kLayerTolerance,
               what + " input grad");
  expect_close(params.named[0].second.grad(), chunk_of(weight.grad(), 1, pc), kLayerTolerance, what + " weight grad");
  // Under sequence parallelism each rank's bias gradient covers its own tokens: summed over TP.
  const at::Tensor bias_grad = params.named[1].second.grad();
  expect_close(sequence_parallel ? sum_over_tp(bias_grad, pc) : bias_grad, bias.grad(), kLayerTolerance,
               what + " bias grad");
  EXPECT_EQ(params.layouts[0].partition_dim, 1);
  EXPECT_FALSE(params.layouts[1].sharded());
  EXPECT_EQ(params.layouts[1].sequence_parallel, sequence_parallel);
}

TEST(RowParallelLinear, MatchesDenseWithParallelInput) {
  FOR_EACH_TP(tp) check_row_parallel_linear(tp, true, false);
}
TEST(RowParallelLinear, MatchesDenseWithFullInput) {
  FOR_EACH_TP(tp) check_row_parallel_linear(tp, false, false);
}
TEST(RowParallelLinear, MatchesDenseWithSequenceParallel) {
  FOR_EACH_TP(tp) check_row_parallel_linear(tp, true, true);
}

void check_vocab_parallel_embedding(int tp, bool reduce_scatter) {
  const ParallelContext& pc = context(tp);
  const std::string what = "TP " + std::to_string(tp) + (reduce_scatter ? " reduce-scatter" : "");
  const std::int64_t vocab = 16;
  const int hidden = 5;
  const parallel::ParameterInit gen(41);
  const VocabParallelEmbedding layer(vocab, hidden, 0.5, gen, pc, reduce_scatter);
  const parallel::ParameterInit ref_gen(41);
  const at::Tensor weight = ref_gen.full("weight", {vocab, hidden}, 0.5).requires_grad_();
  expect_equal(layer.weight(), chunk_of(weight, 0, pc), what + " weight shard");

  // Ids in every rank's range, some repeated, [b, s].
  const at::Tensor ids = (at::arange(kBatch * kSeq, at::kLong) * 7 % vocab).view({kBatch, kSeq});
  const at::Tensor y = layer.forward(ids);
  const at::Tensor y_ref = at::embedding(weight, ids);  // [b, s, h]
  const at::Tensor grad_full = seeded_randn({kBatch, kSeq, hidden}, 42);
  if (reduce_scatter) {
    expect_close(y, chunk_of(y_ref.transpose(0, 1), 0, pc), kLayerTolerance, what + " output");
    (y * chunk_of(grad_full.transpose(0, 1), 0, pc)).sum().backward();
  } else {
    expect_close(y, y_ref, kLayerTolerance, what + " output");
    (y * grad_full).sum().backward();
  }
  (y_ref * grad_full).sum().backward();
  expect_close(layer.weight().grad(), chunk_of(weight.grad(), 0, pc), kLayerTolerance, what + " weight grad");
}

TEST(VocabParallelEmbedding, MatchesDenseForIdsOfEveryRank) {
  FOR_EACH_TP(tp) check_vocab_parallel_embedding(tp, false);
}
TEST(VocabParallelEmbedding, MatchesDenseWhenReduceScatteringIntoSequenceParallel) {
  FOR_EACH_TP(tp) check_vocab_parallel_embedding(tp, true);
}

TEST(VocabParallelCrossEntropy, MatchesDenseLossAndLogitGradients) {
  FOR_EACH_TP(tp) {
    const ParallelContext& pc = context(tp);
    const std::int64_t vocab = 16;
    const at::Tensor logits_full = seeded_randn({4, kBatch, vocab}, 51) * 3;
    const at::Tensor targets = (at::arange(4 * kBatch, at::kLong) * 5 % vocab).view({4, kBatch});  // every rank's
    const at::Tensor weights = seeded_randn({4, kBatch}, 52);
    const at::Tensor logits = chunk_of(logits_full, -1, pc).requires_grad_();
    const at::Tensor loss = vocab_parallel_cross_entropy(logits, targets, pc);
    const at::Tensor logits_ref = logits_full.clone().requires_grad_();
    const at::Tensor loss_ref =
        at::logsumexp(logits_ref, -1) - logits_ref.gather(-1, targets.unsqueeze(-1)).squeeze(-1);
    expect_close(loss, loss_ref, kLayerTolerance, "TP " + std::to_string(tp) + " loss");
    (loss * weights).sum().backward();
    (loss_ref * weights).sum().backward();
    expect_close(logits.grad(), chunk_of(logits_ref.grad(), -1, pc), kLayerTolerance,
                 "TP " + std::to_string(tp) + " logit grad");
  }
}

}  // namespace
}  // namespace megatron::parallel

// ---------------------------------------------------------------------------------------------
// Whole models against the single-process model.

namespace megatron::model {
namespace {

using parallel::context;
using parallel::expect_close;
using parallel::gather_full;
using parallel::generator;
using parallel::tp_sizes;

using megatron::testing::tiny_config;
using megatron::testing::Tolerance;

// Loss and gathered gradients within 1e-5 of the largest reference magnitude (plus a tiny floor).
const Tolerance kModelTolerance = Tolerance::of_largest(1e-12, 1e-5);

ModelConfig rope_config() {
  ModelConfig c = tiny_config();
  c.position_embedding = PositionEmbedding::kRope;
  c.normalization = Normalization::kRmsNorm;
  c.swiglu = true;
  c.num_attention_heads = 8;
  c.num_query_groups = 4;
  c.kv_channels = 8;
  c.untie_embeddings_and_output_weights = true;
  return c;
}

bool perturbed(const std::string& name) {
  return name.find("layernorm") != std::string::npos || name.find("bias") != std::string::npos;
}

void check_matches_single_process(ModelConfig config, int tp) {
  const parallel::ParallelContext& pc = context(tp);
  const std::string layout = "TP " + std::to_string(tp) + (config.sequence_parallel ? " SP" : "");
  const parallel::ParameterInit init(1234);
  const GptModel single(config, parallel::single_process_context(), init);
  const GptModel model(config, pc, init);
  const auto& names = single.named_parameters();
  const auto& params = model.named_parameters();
  const auto& layouts = model.parameter_layouts();
  ASSERT_EQ(params.size(), names.size());
  ASSERT_EQ(layouts.size(), names.size());

  // Initial weights: the single-process ones, bit for bit; then the same non-trivial norms/biases.
  at::Generator noise_gen = generator(99);
  for (std::size_t i = 0; i < names.size(); ++i) {
    ASSERT_EQ(params[i].first, names[i].first);
    EXPECT_TRUE(at::equal(gather_full(params[i].second, layouts[i], pc, params[i].first), names[i].second))
        << layout << ": initial " << names[i].first << " differs from the single-process one";
    EXPECT_EQ(layouts[i].sequence_parallel,
              config.sequence_parallel && (names[i].first.find("layernorm") != std::string::npos ||
                                           names[i].first.find("linear_proj.bias") != std::string::npos ||
                                           names[i].first.find("linear_fc2.bias") != std::string::npos))
        << layout << ": " << names[i].first;
    if (perturbed(names[i].first)) {
      at::NoGradGuard no_grad;
      const at::Tensor noise = at::randn(names[i].second.sizes(), noise_gen) * 0.1;
      names[i].second.add_(noise);
      params[i].second.add_(parallel::shard_of_full(noise, layouts[i], parallel::tp_rank(pc), tp));
    }
  }

  at::Generator batch_gen = generator(7);
  const std::int64_t b = 2, s = config.seq_length;
  const at::Tensor tokens = at::randint(config.padded_vocab_size, {b, s}, batch_gen, at::kLong);
  const at::Tensor labels = at::randint(config.padded_vocab_size, {b, s}, batch_gen, at::kLong);
  const at::Tensor loss_mask = (at::rand({b, s}, batch_gen) > 0.2).to(at::kFloat);
  const at::Tensor position_ids = at::arange(s, at::kLong).expand({b, s});
  const ForwardContext ctx{true, nullptr, nullptr};
  auto loss_of = [&](const GptModel& m) {
    const at::Tensor token_loss = m.forward(tokens, position_ids, at::Tensor(), labels, ctx);
    return (token_loss * loss_mask).sum() / loss_mask.sum().clamp_min(1);
  };
  const at::Tensor loss_ref = loss_of(single), loss = loss_of(model);
  loss_ref.backward();
  loss.backward();
  expect_close(loss, loss_ref, kModelTolerance, layout + " loss");
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string what = layout + " grad of " + names[i].first;
    ASSERT_TRUE(params[i].second.grad().defined()) << what;
    at::Tensor grad = params[i].second.grad();
    if (layouts[i].sequence_parallel) grad = parallel::sum_over_tp(grad, pc);  // the finalize step's TP sum
    expect_close(gather_full(grad, layouts[i], pc, what), names[i].second.grad(), kModelTolerance, what);
  }
}

TEST(GptModelTensorParallel, LearnedPositionsLayerNormGeluTiedMatchesSingleProcess) {
  FOR_EACH_TP(tp) check_matches_single_process(tiny_config(), tp);
}

TEST(GptModelTensorParallel, LearnedPositionsLayerNormGeluTiedWithSequenceParallelMatchesSingleProcess) {
  ModelConfig c = tiny_config();
  c.sequence_parallel = true;
  FOR_EACH_TP(tp) check_matches_single_process(c, tp);
}

TEST(GptModelTensorParallel, RopeRmsNormSwigluGqaUntiedMatchesSingleProcess) {
  FOR_EACH_TP(tp) check_matches_single_process(rope_config(), tp);
}

TEST(GptModelTensorParallel, RopeRmsNormSwigluGqaUntiedWithSequenceParallelMatchesSingleProcess) {
  ModelConfig c = rope_config();
  c.sequence_parallel = true;
  FOR_EACH_TP(tp) check_matches_single_process(c, tp);
}

TEST(GptModelTensorParallel, RejectsQueryGroupsNotDivisibleByTp) {
  ModelConfig c = tiny_config();
  c.num_query_groups = 1;
  FOR_EACH_TP(tp) {
    const parallel::ParameterInit gen(1);
    try {
      const GptModel model(c, context(tp), gen);
      ADD_FAILURE() << "TP " << tp << " accepted one query group";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--num-query-groups (1) must be divisible by --tensor-model-parallel-size"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace megatron::model
