// GptModel's own properties: the key/value-cache path against the full forward, Megatron's
// parameter names, count, layouts and initial distributions, dropout determinism, pipeline stages
// and dtypes (the comparison with plain PyTorch is test_gpt_model_parity.cpp).
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "model/tiny_model_config.h"
#include "megatron/model/gpt_model.h"
#include "megatron/parallel/single_process_context.h"
#include "test_support.h"
#include "tensor_expect.h"

namespace megatron::model {
namespace {

using megatron::testing::expect_close;
using megatron::testing::Tolerance;

using testing::tiny_config;

// The key/value-cache path (generation) is a separate implementation of attention: a prompt in one
// step and then one token per step must give the logits of the full causal forward (itself
// checked against plain PyTorch above), for learned positions, RoPE with GQA, and partial
// interleaved rotary with MQA.
void expect_cached_matches_full(const ModelConfig& c) {
  const GptModel model(c, parallel::single_process_context(), parallel::ParameterInit(11));
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(11);
  at::NoGradGuard no_grad;
  const at::Tensor tokens = at::randint(c.padded_vocab_size, {2, 12}, gen, at::kLong);
  const at::Tensor positions = at::arange(12, at::kLong).unsqueeze(0).expand({2, 12});
  const at::Tensor full = model.forward(tokens, positions, at::Tensor(), at::Tensor(), ForwardContext{false});
  const Tolerance tol = Tolerance::absolute(1e-5 * full.abs().max().item<double>());
  GptModel::KvCache cache;
  const at::Tensor prompt = model.forward_cached(tokens.narrow(1, 0, 5), cache);
  EXPECT_EQ(cache.length(), 5);
  expect_close(prompt, full.narrow(1, 0, 5), tol, "the prompt");
  for (int t = 5; t < 12; ++t) {
    const at::Tensor step = model.forward_cached(tokens.narrow(1, t, 1), cache);
    expect_close(step, full.narrow(1, t, 1), tol, "position " + std::to_string(t));
  }
  EXPECT_EQ(cache.length(), 12);
}

TEST(GptModel, CachedInferenceMatchesTheFullForward) {
  expect_cached_matches_full(tiny_config());
  ModelConfig rope = tiny_config();
  rope.position_embedding = PositionEmbedding::kRope;
  rope.normalization = Normalization::kRmsNorm;
  rope.swiglu = true;
  rope.num_query_groups = 2;
  rope.untie_embeddings_and_output_weights = true;
  rope.add_bias_linear = false;
  expect_cached_matches_full(rope);
  ModelConfig mqa = tiny_config();
  mqa.position_embedding = PositionEmbedding::kRope;
  mqa.rotary_interleaved = true;
  mqa.rotary_percent = 0.5;
  mqa.num_query_groups = 1;
  expect_cached_matches_full(mqa);
}

TEST(GptModel, HasMegatronParameterNamesAndCount) {
  ModelConfig c = tiny_config();
  const parallel::ParameterInit gen(1);
  const GptModel model(c, parallel::single_process_context(), gen);
  std::vector<std::string> names;
  int64_t count = 0;
  for (const auto& [name, t] : model.named_parameters()) {
    names.push_back(name);
    count += t.numel();
  }
  EXPECT_EQ(count, c.num_parameters());
  const std::vector<std::string> first = {
      "embedding.word_embeddings.weight", "embedding.position_embeddings.weight",
      "decoder.layers.0.input_layernorm.weight", "decoder.layers.0.input_layernorm.bias",
      // Megatron-Core's registration order: the projection (Attention) before QKV (SelfAttention).
      "decoder.layers.0.self_attention.linear_proj.weight", "decoder.layers.0.self_attention.linear_proj.bias",
      "decoder.layers.0.self_attention.linear_qkv.weight", "decoder.layers.0.self_attention.linear_qkv.bias",
      "decoder.layers.0.pre_mlp_layernorm.weight", "decoder.layers.0.pre_mlp_layernorm.bias",
      "decoder.layers.0.mlp.linear_fc1.weight", "decoder.layers.0.mlp.linear_fc1.bias",
      "decoder.layers.0.mlp.linear_fc2.weight", "decoder.layers.0.mlp.linear_fc2.bias"};
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 14), first);
  EXPECT_EQ(names.back(), "decoder.final_layernorm.bias");  // tied: no output_layer.weight
}

TEST(GptModel, InitialisationFollowsMegatronDistributions) {
  ModelConfig c = tiny_config();
  c.num_layers = 8;
  c.hidden_size = 256;
  c.ffn_hidden_size = 1024;
  c.kv_channels = 64;
  c.init_method_std = 0.02;
  const parallel::ParameterInit gen(7);
  const GptModel model(c, parallel::single_process_context(), gen);
  for (const auto& [name, t] : model.named_parameters()) {
    const double std = t.std().item<double>(), mean = t.mean().item<double>();
    if (name.find("linear_proj.weight") != std::string::npos || name.find("linear_fc2.weight") != std::string::npos) {
      EXPECT_NEAR(std, 0.02 / std::sqrt(16.0), 0.0005) << name;
    } else if (name.find("layernorm.weight") != std::string::npos) {
      EXPECT_EQ(mean, 1.0) << name;
    } else if (name.find("bias") != std::string::npos) {
      EXPECT_EQ(t.abs().max().item<double>(), 0.0) << name;
    } else {
      EXPECT_NEAR(std, 0.02, 0.001) << name;
    }
  }
}

TEST(GptModel, DropoutIsDeterministicPerGeneratorAndOffInEval) {
  ModelConfig c = tiny_config();
  c.hidden_dropout = 0.3;
  c.attention_dropout = 0.3;
  const parallel::ParameterInit init(3);
  const GptModel model(c, parallel::single_process_context(), init);
  const at::Tensor tokens = at::arange(32, at::kLong).view({2, 16}) % c.padded_vocab_size;
  const at::Tensor pos = at::arange(16, at::kLong).expand({2, 16});
  auto run = [&](bool training, uint64_t seed) {
    at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
    ForwardContext ctx{training, &g, &g};
    return model.forward(tokens, pos, at::Tensor(), at::Tensor(), ctx).detach();
  };
  EXPECT_TRUE(at::equal(run(true, 5), run(true, 5)));
  EXPECT_FALSE(at::equal(run(true, 5), run(true, 6)));
  EXPECT_TRUE(at::equal(run(false, 5), run(false, 6)));
}

TEST(GptModel, ParameterLayoutsAreAlignedWithNamesAndFollowMegatron) {
  ModelConfig c = tiny_config();
  c.swiglu = true;
  c.untie_embeddings_and_output_weights = true;
  const parallel::ParameterInit gen(1);
  const GptModel model(c, parallel::single_process_context(), gen);
  ASSERT_EQ(model.parameter_layouts().size(), model.named_parameters().size());
  std::map<std::string, parallel::TensorParallelLayout> layouts;
  for (std::size_t i = 0; i < model.named_parameters().size(); ++i) {
    layouts[model.named_parameters()[i].first] = model.parameter_layouts()[i];
  }
  auto expect_layout = [&](const std::string& name, int dim, int stride) {
    ASSERT_TRUE(layouts.count(name)) << name;
    EXPECT_EQ(layouts[name].partition_dim, dim) << name;
    EXPECT_EQ(layouts[name].partition_stride, stride) << name;
    EXPECT_FALSE(layouts[name].sequence_parallel) << name << ": no sequence parallelism at TP size 1";
  };
  expect_layout("embedding.word_embeddings.weight", 0, 1);
  expect_layout("embedding.position_embeddings.weight", -1, 1);
  expect_layout("decoder.layers.0.input_layernorm.weight", -1, 1);
  expect_layout("decoder.layers.0.self_attention.linear_qkv.weight", 0, 1);
  expect_layout("decoder.layers.0.self_attention.linear_qkv.bias", 0, 1);
  expect_layout("decoder.layers.0.self_attention.linear_proj.weight", 1, 1);
  expect_layout("decoder.layers.0.self_attention.linear_proj.bias", -1, 1);
  expect_layout("decoder.layers.1.mlp.linear_fc1.weight", 0, 2);
  expect_layout("decoder.layers.1.mlp.linear_fc1.bias", 0, 2);
  expect_layout("decoder.layers.1.mlp.linear_fc2.weight", 1, 1);
  expect_layout("output_layer.weight", 0, 1);
}

// A later pipeline stage draws the earlier stages' weights first, so its own equal the
// single-process model's: stage 1 of 2 holds layers 2, 3 of the whole model and the output layer.
TEST(GptModel, LaterPipelineStageStartsFromTheSingleProcessWeights) {
  ModelConfig c = tiny_config();
  c.num_layers = 4;
  c.untie_embeddings_and_output_weights = true;
  const parallel::ParameterInit whole_gen(11);
  const GptModel whole(c, parallel::single_process_context(), whole_gen);
  const parallel::ParallelState stage1(parallel::ParallelConfig{2, 1, 2, 1, false}, 1);
  parallel::ParallelContext pc = parallel::single_process_context();
  pc.state = &stage1;
  pc.tp = std::make_shared<parallel::ProcessGroup>("tensor-model-parallel", std::vector<int>{1}, 1);
  const parallel::ParameterInit stage_gen(11);
  const GptModel stage(c, pc, stage_gen);
  std::map<std::string, at::Tensor> reference(whole.named_parameters().begin(), whole.named_parameters().end());
  ASSERT_FALSE(stage.pre_process());
  for (const auto& [name, t] : stage.named_parameters()) {
    std::string whole_name = name;
    if (name.rfind("decoder.layers.", 0) == 0) {  // stage-local layer numbers: 0, 1 -> 2, 3
      const std::size_t dot = name.find('.', 15);
      whole_name = "decoder.layers." + std::to_string(std::stoi(name.substr(15, dot - 15)) + 2) + name.substr(dot);
    }
    ASSERT_TRUE(reference.count(whole_name)) << whole_name;
    EXPECT_TRUE(at::equal(t, reference[whole_name])) << name << " differs from " << whole_name;
  }
}

TEST(GptModel, HiddenDropoutUsesTheModelParallelStreamUnderSequenceParallelism) {
  at::Generator a = at::make_generator<at::CPUGeneratorImpl>(1);
  at::Generator b = at::make_generator<at::CPUGeneratorImpl>(2);
  const ForwardContext ctx{true, &a, &b};
  EXPECT_EQ(ctx.hidden_gen(false), &a);
  EXPECT_EQ(ctx.hidden_gen(true), &b);
}

// Weights are drawn on CPU in fp32 whatever the parameters' dtype: the same values, converted.
TEST(GptModel, ParametersTakeTheRequestedDtypeWithTheSameInitialValues) {
  const ModelConfig c = tiny_config();
  const parallel::ParameterInit float_gen(5);
  const parallel::ParameterInit double_gen(5);
  const GptModel float_model(c, parallel::single_process_context(), float_gen);
  const GptModel double_model(c, parallel::single_process_context(), double_gen, at::TensorOptions().dtype(at::kDouble));
  for (std::size_t i = 0; i < float_model.named_parameters().size(); ++i) {
    const at::Tensor& t = double_model.named_parameters()[i].second;
    EXPECT_EQ(t.scalar_type(), at::kDouble) << double_model.named_parameters()[i].first;
    EXPECT_TRUE(t.is_leaf() && t.requires_grad());
    EXPECT_TRUE(at::equal(t.to(at::kFloat), float_model.named_parameters()[i].second));
  }
  const at::Tensor tokens = at::arange(32, at::kLong).view({2, 16}) % c.padded_vocab_size;
  const at::Tensor pos = at::arange(16, at::kLong).expand({2, 16});
  const ForwardContext ctx{false, nullptr, nullptr};
  const at::Tensor loss = double_model.forward(tokens, pos, at::Tensor(), tokens, ctx);
  EXPECT_EQ(loss.scalar_type(), at::kFloat);  // the loss is fp32 (spec 10.7)
  const at::Tensor float_loss = float_model.forward(tokens, pos, at::Tensor(), tokens, ctx);
  expect_close(loss, float_loss, Tolerance::elementwise(1e-5, 1e-4), "loss");
}

}  // namespace
}  // namespace megatron::model
