// ModelConfig without LibTorch: Megatron's derived sizes, the JSON it is saved as (Megatron's
// argument names and choice strings), and the shape comparison a resume makes.
#include "megatron/model/model_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "megatron/core/check.h"
#include "test_support.h"

namespace megatron::model {
namespace {

using megatron::testing::error_of;
using megatron::testing::expect_contains;

TEST(ModelConfig, DerivesMegatronsSizes) {
  ModelConfig c;
  c.hidden_size = 4096;
  c.num_attention_heads = 32;
  c.ffn_hidden_size = c.kv_channels = c.num_query_groups = 0;
  c.derive_defaults();
  EXPECT_EQ(c.ffn_hidden_size, 16384);
  EXPECT_EQ(c.kv_channels, 128);
  EXPECT_EQ(c.num_query_groups, 32);
  // SwiGLU: int(4h * 2/3 / 64) * 64 (Megatron's validate_args), 10922.67 -> 10880.
  EXPECT_EQ(ModelConfig::default_ffn_hidden_size(4096, true), 10880);
  // Given sizes stay.
  ModelConfig given = c;
  given.ffn_hidden_size = 11008;
  given.num_query_groups = 8;
  given.derive_defaults();
  EXPECT_EQ(given.ffn_hidden_size, 11008);
  EXPECT_EQ(given.num_query_groups, 8);
  // Megatron's vocabulary padding: to a multiple of 128 x TP.
  EXPECT_EQ(ModelConfig::padded_vocab_size_for(50257, 128, 1), 50304);
  EXPECT_EQ(ModelConfig::padded_vocab_size_for(50257, 128, 8), 51200);
  EXPECT_EQ(ModelConfig::padded_vocab_size_for(32000, 128, 2), 32000);
}

TEST(ModelConfig, JsonUsesMegatronsNamesAndReadsBackEqual) {
  ModelConfig c;
  c.num_layers = 3;
  c.num_query_groups = 2;
  c.position_embedding = PositionEmbedding::kRope;
  c.rotary_base = 500000;
  c.normalization = Normalization::kRmsNorm;
  c.swiglu = true;
  c.untie_embeddings_and_output_weights = true;
  c.attention_backend = AttentionBackend::kFlash;
  c.recompute_granularity = RecomputeGranularity::kFull;
  c.recompute_method = RecomputeMethod::kBlock;
  c.recompute_num_layers = 2;
  c.padded_vocab_size = 50304;
  const nlohmann::json j = c.to_json();
  EXPECT_EQ(j.at("position_embedding_type"), "rope");
  EXPECT_EQ(j.at("normalization"), "RMSNorm");
  EXPECT_EQ(j.at("attention_backend"), "flash");
  EXPECT_EQ(j.at("recompute_granularity"), "full");
  EXPECT_EQ(j.at("recompute_method"), "block");
  EXPECT_EQ(j.at("num_query_groups"), 2);
  EXPECT_EQ(j.at("padded_vocab_size"), 50304);
  EXPECT_EQ(ModelConfig::from_json(nlohmann::json::parse(j.dump())).to_json(), j);
  // Megatron's None for no recomputation; absent keys keep the defaults.
  EXPECT_TRUE(ModelConfig().to_json().at("recompute_granularity").is_null());
  const ModelConfig partial = ModelConfig::from_json({{"num_layers", 7}});
  EXPECT_EQ(partial.num_layers, 7);
  EXPECT_EQ(partial.hidden_size, ModelConfig().hidden_size);
}

TEST(ModelConfig, JsonOfTheWrongTypeOrChoiceNamesTheKey) {
  expect_contains(error_of([] { ModelConfig::from_json({{"hidden_size", "64"}}); }),
                  {"'hidden_size' is \"64\", not a number"});
  expect_contains(error_of([] { ModelConfig::from_json({{"swiglu", 1}}); }), {"'swiglu' is 1, not true or false"});
  expect_contains(error_of([] { ModelConfig::from_json({{"normalization", "BatchNorm"}}); }),
                  {"'normalization' is \"BatchNorm\", not one of 'LayerNorm', 'RMSNorm'"});
  expect_contains(error_of([] { ModelConfig::from_json({{"num_layers", 2.5}}); }), {"'num_layers' is 2.5"});
}

TEST(ModelConfig, ShapeDifferencesNameEachShapeSettingOnly) {
  ModelConfig saved, now;
  now.hidden_size = 48;
  now.normalization = Normalization::kRmsNorm;
  now.hidden_dropout = 0.0;  // numerics, not shape
  now.recompute_granularity = RecomputeGranularity::kSelective;
  EXPECT_EQ(now.shape_differences_from(saved),
            (std::vector<std::string>{"hidden_size: checkpoint 64, command line 48",
                                      "normalization: checkpoint \"LayerNorm\", command line \"RMSNorm\""}));
  EXPECT_TRUE(saved.shape_differences_from(saved).empty());
  // What the command line changes besides: followed, and named for a note.
  EXPECT_EQ(now.setting_differences_from(saved),
            (std::vector<std::string>{"hidden_dropout 0.0 (the checkpoint's run had 0.1)"}));
}

// As Megatron's check_checkpoint_args, a size no tensor depends on is not a different model: the
// dense MLP size when every layer has experts, the position table's length with rotary positions.
TEST(ModelConfig, SizesNoTensorDependsOnAreSettingsNotShapes) {
  ModelConfig saved;
  saved.moe.num_experts = 4;
  saved.moe.ffn_hidden_size = 96;
  saved.ffn_hidden_size = 96;
  ModelConfig now = saved;
  now.ffn_hidden_size = 128;
  EXPECT_TRUE(now.shape_differences_from(saved).empty());
  EXPECT_EQ(now.setting_differences_from(saved),
            (std::vector<std::string>{"ffn_hidden_size 128 (the checkpoint's run had 96)"}));
  now.moe.layer_pattern = {1, 0};  // a dense layer: its MLP is --ffn-hidden-size
  now.num_layers = saved.num_layers = 2;
  saved.moe.layer_pattern = now.moe.layer_pattern;
  EXPECT_EQ(now.shape_differences_from(saved), (std::vector<std::string>{"ffn_hidden_size: checkpoint 96, command line 128"}));
  // The experts' size unset means --ffn-hidden-size: the same experts either way.
  ModelConfig implicit = saved;
  implicit.moe.ffn_hidden_size = 0;
  EXPECT_TRUE(implicit.shape_differences_from(saved).empty());

  ModelConfig rope;
  rope.position_embedding = PositionEmbedding::kRope;
  ModelConfig longer = rope;
  longer.max_position_embeddings = 4 * rope.max_position_embeddings;
  EXPECT_TRUE(longer.shape_differences_from(rope).empty());
  ModelConfig learned, learned_longer;
  learned_longer.max_position_embeddings = 4 * learned.max_position_embeddings;
  EXPECT_EQ(learned_longer.shape_differences_from(learned).size(), 1u);
}

}  // namespace
}  // namespace megatron::model
