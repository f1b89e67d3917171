// GptModel against an independent plain-PyTorch implementation (gpt_reference.py, run through
// MEGATRON_PYTHON): the same weights and batch give the same loss and the same gradient for every
// parameter, within 1e-5 relative, in fp32.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "model/tiny_model_config.h"
#include "megatron/model/gpt_model.h"
#include "megatron/parallel/single_process_context.h"
#include "test_support.h"
#include "tensor_expect.h"

namespace megatron::model {
namespace {

using testing::TempDir;

void write_raw(const std::string& path, const at::Tensor& t) {
  const at::Tensor c = t.detach().contiguous();
  std::ofstream(path, std::ios::binary)
      .write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
}

at::Tensor read_raw(const std::string& path, at::IntArrayRef shape, at::ScalarType dtype) {
  at::Tensor t = at::empty(shape, dtype);
  std::ifstream in(path, std::ios::binary);
  in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return t;
}

nlohmann::json to_reference_json(const ModelConfig& c) {
  return {{"num_layers", c.num_layers},
          {"num_attention_heads", c.num_attention_heads},
          {"num_query_groups", c.num_query_groups},
          {"kv_channels", c.kv_channels},
          {"normalization", c.normalization == Normalization::kLayerNorm ? "LayerNorm" : "RMSNorm"},
          {"norm_epsilon", c.norm_epsilon},
          {"swiglu", c.swiglu},
          {"position_embedding_type", c.position_embedding == PositionEmbedding::kRope ? "rope" : "learned_absolute"},
          {"rotary_base", c.rotary_base},
          {"rotary_percent", c.rotary_percent},
          {"rotary_interleaved", c.rotary_interleaved},
          {"qk_layernorm", c.qk_layernorm}};
}

using megatron::testing::tiny_config;

// Runs the C++ model and the Python reference on the same weights and batch; compares.
void expect_matches_reference(const ModelConfig& config) {
  GptModel model(config, parallel::single_process_context(), parallel::ParameterInit(1234));
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1234);
  {  // non-trivial norm weights and biases
    at::NoGradGuard no_grad;
    for (auto& [name, t] : model.named_parameters()) {
      if (name.find("layernorm") != std::string::npos || name.find("bias") != std::string::npos) {
        t.add_(at::randn(t.sizes(), gen) * 0.1);
      }
    }
  }
  const int64_t b = 3, s = config.seq_length;
  const at::Tensor tokens = at::randint(config.padded_vocab_size, {b, s}, gen, at::kLong);
  const at::Tensor labels = at::randint(config.padded_vocab_size, {b, s}, gen, at::kLong);
  const at::Tensor loss_mask = (at::rand({b, s}, gen) > 0.2).to(at::kFloat);
  const at::Tensor position_ids = at::arange(s, at::kLong).expand({b, s});

  TempDir dir("gpt_parity");
  nlohmann::json index;
  for (const auto& [name, t] : model.named_parameters()) {
    index["params"][name] = t.sizes().vec();
    write_raw(dir / (name + ".bin"), t);
  }
  index["batch"] = {b, s};
  write_raw(dir / "tokens.bin", tokens);
  write_raw(dir / "labels.bin", labels);
  write_raw(dir / "loss_mask.bin", loss_mask);
  dir.write("index.json", index.dump());
  dir.write("config.json", to_reference_json(config).dump());
  const std::string cmd = std::string(testing::paths::kPython) + " " + testing::paths::kTestsSource +
                          "/unit/model/gpt_reference.py " + dir.path().string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  ForwardContext ctx;
  ctx.training = true;
  const at::Tensor token_loss = model.forward(tokens, position_ids, at::Tensor(), labels, ctx);
  const at::Tensor loss = (token_loss * loss_mask).sum() / loss_mask.sum().clamp_min(1);
  loss.backward();

  const double ref_loss = read_raw(dir / "out/loss.bin", {1}, at::kDouble).item<double>();
  EXPECT_NEAR(loss.item<double>(), ref_loss, 1e-5 * std::abs(ref_loss));
  for (const auto& [name, t] : model.named_parameters()) {
    const at::Tensor ref = read_raw(dir / ("out/" + name + ".bin"), t.sizes(), at::kFloat);
    ASSERT_TRUE(t.grad().defined()) << name << " got no gradient";
    if (name.ends_with("k_layernorm.bias")) {
      // The same vector added to every key moves every score of a query alike, which the softmax
      // ignores: this gradient is zero, both sides hold rounding noise.
      EXPECT_LT(t.grad().abs().max().item<double>(), 1e-6) << name;
      EXPECT_LT(ref.abs().max().item<double>(), 1e-6) << name;
      continue;
    }
    megatron::testing::expect_close(t.grad(), ref, megatron::testing::Tolerance::of_largest(1e-9, 1e-5), name);
  }
}

TEST(GptModelParity, MatchesPlainPyTorchLearnedPositionsLayerNormGeluTied) {
  expect_matches_reference(tiny_config());
}

TEST(GptModelParity, MatchesPlainPyTorchRopeRmsNormSwigluGqaUntiedNoBias) {
  ModelConfig c = tiny_config();
  c.position_embedding = PositionEmbedding::kRope;
  c.normalization = Normalization::kRmsNorm;
  c.swiglu = true;
  c.num_query_groups = 2;
  c.untie_embeddings_and_output_weights = true;
  c.add_bias_linear = false;
  expect_matches_reference(c);
}

TEST(GptModelParity, MatchesPlainPyTorchQkLayerNorm) {
  ModelConfig c = tiny_config();  // LayerNorm: the q and k norms have biases
  c.qk_layernorm = true;
  expect_matches_reference(c);
  c.position_embedding = PositionEmbedding::kRope;  // Qwen3's: RMSNorm over each head, then RoPE
  c.normalization = Normalization::kRmsNorm;
  c.swiglu = true;
  c.num_query_groups = 2;
  c.add_bias_linear = false;
  expect_matches_reference(c);
}

TEST(GptModelParity, MatchesPlainPyTorchInterleavedPartialRotaryMqa) {
  ModelConfig c = tiny_config();
  c.position_embedding = PositionEmbedding::kRope;
  c.rotary_interleaved = true;
  c.rotary_percent = 0.5;
  c.num_query_groups = 1;
  expect_matches_reference(c);
}

}  // namespace
}  // namespace megatron::model
