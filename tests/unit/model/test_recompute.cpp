// Recomputation and the attention paths at the model level, in fp32 on CPU: with dropout on,
// selective and full recomputation give the gradients of no recomputation (the random streams are
// replayed), and they lower the peak of allocated memory over a forward and backward pass,
// measured by a counting wrapper around LibTorch's CPU allocator; scaled-dot-product attention
// (LibTorch's CPU kernel) and the explicit path give the same loss and gradients, with grouped
// query attention too.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "megatron/model/gpt_model.h"
#include "megatron/parallel/single_process_context.h"
#include "counting_allocator.h"
#include "model/tiny_model_config.h"
#include "tensor_expect.h"

namespace megatron::model {
namespace {

using testing::CountingAllocator;

ModelConfig config_with(RecomputeGranularity granularity, AttentionBackend backend = AttentionBackend::kUnfused) {
  ModelConfig c = testing::tiny_config();
  c.num_layers = 4;
  c.seq_length = 64;
  c.max_position_embeddings = 64;
  c.attention_dropout = 0.1;
  c.hidden_dropout = 0.1;
  c.recompute_granularity = granularity;
  c.recompute_method = RecomputeMethod::kUniform;
  c.recompute_num_layers = 1;
  c.attention_backend = backend;
  return c;
}

struct Pass {
  double loss = 0.0;
  std::map<std::string, at::Tensor> grads;
  std::int64_t peak_bytes = 0;  // above what was held before the forward
};

Pass run(const ModelConfig& config, bool training = true) {
  const parallel::ParameterInit init(7);
  GptModel model(config, parallel::single_process_context(), init);
  at::Generator data = at::make_generator<at::CPUGeneratorImpl>(8);
  const at::Tensor tokens = at::randint(config.padded_vocab_size, {8, config.seq_length}, data, at::kLong);
  const at::Tensor labels = at::randint(config.padded_vocab_size, {8, config.seq_length}, data, at::kLong);
  const at::Tensor positions = at::arange(config.seq_length, at::kLong).expand({8, config.seq_length});
  at::Generator dropout = at::make_generator<at::CPUGeneratorImpl>(9), mp = at::make_generator<at::CPUGeneratorImpl>(10);
  const ForwardContext ctx{training, &dropout, &mp};
  Pass out;
  {
    CountingAllocator counter;
    const std::int64_t base = counter.current();
    counter.reset();
    const at::Tensor loss = model.forward(tokens, positions, at::Tensor(), labels, ctx).mean();
    loss.backward();
    out.peak_bytes = counter.peak_above(base);
    out.loss = loss.item<double>();
  }
  for (const auto& [name, p] : model.named_parameters()) out.grads[name] = p.grad().clone();
  return out;
}

void expect_same(const Pass& a, const Pass& b, double tolerance, const std::string& what) {
  EXPECT_NEAR(a.loss, b.loss, tolerance * std::abs(b.loss)) << what;
  for (const auto& [name, g] : b.grads) {
    megatron::testing::expect_close(a.grads.at(name), g, megatron::testing::Tolerance::of_largest(1e-12, tolerance),
                                    what + ": " + name);
  }
}

TEST(Recompute, SameGradientsWithDropoutAndLowerPeakMemory) {
  const Pass none = run(config_with(RecomputeGranularity::kNone));
  const Pass selective = run(config_with(RecomputeGranularity::kSelective));
  const Pass full = run(config_with(RecomputeGranularity::kFull));
  expect_same(selective, none, 1e-6, "selective");
  expect_same(full, none, 1e-6, "full");
  std::printf("peak CPU bytes over forward + backward (4 layers, h 48, s 64, b 8): none %lld, selective %lld, "
              "full (uniform, 1 layer) %lld\n",
              static_cast<long long>(none.peak_bytes), static_cast<long long>(selective.peak_bytes),
              static_cast<long long>(full.peak_bytes));
  EXPECT_LT(selective.peak_bytes, none.peak_bytes);
  EXPECT_LT(full.peak_bytes, selective.peak_bytes);
}

TEST(Recompute, BlockMethodRecomputesTheFirstLayersOnly) {
  ModelConfig c = config_with(RecomputeGranularity::kFull);
  c.recompute_method = RecomputeMethod::kBlock;
  c.recompute_num_layers = 2;
  const Pass none = run(config_with(RecomputeGranularity::kNone));
  const Pass block = run(c);
  expect_same(block, none, 1e-6, "block");
  EXPECT_LT(block.peak_bytes, none.peak_bytes);
}

TEST(Attention, ScaledDotProductPathMatchesTheExplicitPath) {
  for (const int groups : {4, 2, 1}) {  // multi-head, grouped-query, multi-query
    ModelConfig unfused = config_with(RecomputeGranularity::kNone, AttentionBackend::kUnfused);
    unfused.attention_dropout = 0.0;  // the two paths draw their masks differently
    unfused.hidden_dropout = 0.0;
    unfused.num_query_groups = groups;
    ModelConfig sdpa = unfused;
    sdpa.attention_backend = AttentionBackend::kFlash;  // LibTorch's fused CPU kernel here
    ModelConfig plain_softmax = unfused;
    plain_softmax.masked_softmax_fusion = false;
    const Pass a = run(unfused), b = run(sdpa), c = run(plain_softmax);
    expect_same(b, a, 1e-5, "sdpa, groups " + std::to_string(groups));
    expect_same(c, a, 1e-5, "--no-masked-softmax-fusion, groups " + std::to_string(groups));
  }
}

}  // namespace
}  // namespace megatron::model
