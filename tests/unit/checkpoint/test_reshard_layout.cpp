// The resharder's bookkeeping against Megatron's layer offsets worked out by hand: where a layer
// of the full model lives in a pipeline split (stage, chunk, stage-local name), which split a saved
// run configuration describes, when two splits are the same, and the by-name copy of checkpoint
// tensors into a model that reports every mismatch at once.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "megatron/checkpoint/reshard.h"
#include "megatron/checkpoint/saved_run.h"
#include "tensor_expect.h"
#include "test_support.h"

namespace megatron::checkpoint {
namespace {

using parallel::PipelineLayout;

void expect_place(const std::string& full_name, const PipelineLayout& layout, int stage, const std::string& name) {
  const StagePlace place = stage_place(full_name, layout);
  EXPECT_EQ(place.stage, stage) << full_name;
  EXPECT_EQ(place.name, name) << full_name;
}

TEST(StagePlace, EvenSplitNumbersLayersWithinTheirStage) {
  const PipelineLayout even{4, 2, 1, std::nullopt, std::nullopt};  // stage 0: layers 0-1, stage 1: 2-3
  expect_place("decoder.layers.0.mlp.linear_fc1.weight", even, 0, "decoder.layers.0.mlp.linear_fc1.weight");
  expect_place("decoder.layers.1.input_layernorm.weight", even, 0, "decoder.layers.1.input_layernorm.weight");
  expect_place("decoder.layers.2.input_layernorm.weight", even, 1, "decoder.layers.0.input_layernorm.weight");
  expect_place("decoder.layers.3.self_attention.linear_qkv.bias", even, 1,
               "decoder.layers.1.self_attention.linear_qkv.bias");
  expect_place("embedding.word_embeddings.weight", even, 0, "embedding.word_embeddings.weight");
  expect_place("decoder.final_layernorm.weight", even, 1, "decoder.final_layernorm.weight");
  expect_place("output_layer.weight", even, 1, "output_layer.weight");
}

TEST(StagePlace, InterleavedSplitPutsChunkZeroOfEveryStageFirst) {
  // 8 layers, 2 stages x 2 chunks of 2: chunk 0 holds layers 0-1 (stage 0) and 2-3 (stage 1),
  // chunk 1 layers 4-5 (stage 0) and 6-7 (stage 1).
  const PipelineLayout v{8, 2, 2, std::nullopt, std::nullopt};
  expect_place("decoder.layers.1.mlp.linear_fc2.weight", v, 0, "model0.decoder.layers.1.mlp.linear_fc2.weight");
  expect_place("decoder.layers.2.mlp.linear_fc2.weight", v, 1, "model0.decoder.layers.0.mlp.linear_fc2.weight");
  expect_place("decoder.layers.5.mlp.linear_fc2.weight", v, 0, "model1.decoder.layers.1.mlp.linear_fc2.weight");
  expect_place("decoder.layers.6.mlp.linear_fc2.weight", v, 1, "model1.decoder.layers.0.mlp.linear_fc2.weight");
  expect_place("embedding.word_embeddings.weight", v, 0, "model0.embedding.word_embeddings.weight");
  expect_place("decoder.final_layernorm.weight", v, 1, "model1.decoder.final_layernorm.weight");
  expect_place("output_layer.weight", v, 1, "model1.output_layer.weight");
}

TEST(StagePlace, UnevenSplitGivesTheFirstAndLastStagesTheirCounts) {
  // 6 layers over 3 stages, the first and last with 1 each: the middle stage holds layers 1-4.
  const PipelineLayout uneven{6, 3, 1, 1, 1};
  expect_place("decoder.layers.0.input_layernorm.weight", uneven, 0, "decoder.layers.0.input_layernorm.weight");
  expect_place("decoder.layers.1.input_layernorm.weight", uneven, 1, "decoder.layers.0.input_layernorm.weight");
  expect_place("decoder.layers.4.input_layernorm.weight", uneven, 1, "decoder.layers.3.input_layernorm.weight");
  expect_place("decoder.layers.5.input_layernorm.weight", uneven, 2, "decoder.layers.0.input_layernorm.weight");
  // Only the first stage given (5 layers, 2 stages): the last takes the remaining 3.
  const PipelineLayout first_only{5, 2, 1, 2, std::nullopt};
  expect_place("decoder.layers.1.input_layernorm.weight", first_only, 0, "decoder.layers.1.input_layernorm.weight");
  expect_place("decoder.layers.2.input_layernorm.weight", first_only, 1, "decoder.layers.0.input_layernorm.weight");
  expect_place("decoder.layers.4.input_layernorm.weight", first_only, 1, "decoder.layers.2.input_layernorm.weight");
}

TEST(StagePlace, ALayerBeyondTheModelIsAnError) {
  const PipelineLayout even{4, 2, 1, std::nullopt, std::nullopt};
  testing::expect_contains(testing::error_of([&] { stage_place("decoder.layers.4.mlp.linear_fc1.weight", even); }),
                           {"layer 4 is in no stage"});
}

// The layer split a saved run configuration records, at pipeline size `pp` (its folders').
PipelineLayout saved_pipeline_layout(const nlohmann::json& config, int pp) {
  return SavedRun::from_json(config, "iter_0000010").pipeline.layout(pp);
}

TEST(SavedPipelineLayout, ReadsTheSplitFlagsOfTheSavedRun) {
  const PipelineLayout plain = saved_pipeline_layout({{"num_layers", 8}}, 2);
  EXPECT_EQ(plain.num_layers, 8);
  EXPECT_EQ(plain.stages, 2);
  EXPECT_EQ(plain.chunks, 1);
  EXPECT_EQ(plain.first_stage_layers, std::nullopt);
  // Megatron's two spellings of virtual stages: layers per virtual stage (8 / 2 stages / 2) or the count.
  EXPECT_EQ(saved_pipeline_layout({{"num_layers", 8}, {"num_layers_per_virtual_pipeline_stage", 2}}, 2).chunks, 2);
  EXPECT_EQ(saved_pipeline_layout({{"num_layers", 8}, {"num_virtual_stages_per_pipeline_rank", 4}}, 2).chunks, 4);
  // Unset flags are saved as null.
  const nlohmann::json nulls = {{"num_layers", 8},
                                {"num_layers_per_virtual_pipeline_stage", nullptr},
                                {"decoder_first_pipeline_num_layers", nullptr},
                                {"decoder_last_pipeline_num_layers", nullptr}};
  EXPECT_TRUE(same_layer_split(saved_pipeline_layout(nulls, 2), PipelineLayout{8, 2, 1, std::nullopt, std::nullopt}));
  const PipelineLayout uneven = saved_pipeline_layout(
      {{"num_layers", 7}, {"decoder_first_pipeline_num_layers", 1}, {"decoder_last_pipeline_num_layers", 2}}, 3);
  EXPECT_EQ(uneven.first_stage_layers, 1);
  EXPECT_EQ(uneven.last_stage_layers, 2);
  EXPECT_EQ(uneven.layers(1, 0).first, 1);
  EXPECT_EQ(uneven.layers(1, 0).count, 4);
}

TEST(SameLayerSplit, ComparesTheLayersEachStageHoldsNotTheFlags) {
  const PipelineLayout even{4, 2, 1, std::nullopt, std::nullopt};
  EXPECT_TRUE(same_layer_split(even, even));
  EXPECT_TRUE(same_layer_split(even, PipelineLayout{4, 2, 1, 2, std::nullopt}));  // first 2 of 4: even anyway
  EXPECT_TRUE(same_layer_split(even, PipelineLayout{4, 2, 1, 2, 2}));
  EXPECT_FALSE(same_layer_split(even, PipelineLayout{4, 2, 1, 1, std::nullopt}));  // 1 + 3
  EXPECT_FALSE(same_layer_split(even, PipelineLayout{4, 2, 2, std::nullopt, std::nullopt}));
  EXPECT_FALSE(same_layer_split(even, PipelineLayout{4, 4, 1, std::nullopt, std::nullopt}));
  EXPECT_FALSE(same_layer_split(even, PipelineLayout{6, 2, 1, std::nullopt, std::nullopt}));
}

TEST(LoadParameters, CopiesByNameWhateverTheOrder) {
  const NamedTensors params = {{"a", at::zeros({2, 3})}, {"b", at::zeros({4})}};
  const NamedTensors saved = {{"b", at::arange(4, at::kFloat)}, {"a", at::arange(6, at::kFloat).view({2, 3}) + 10}};
  load_parameters(params, saved, "iter_0000001/mp_rank_00");
  testing::expect_equal(params[0].second, saved[1].second, "a");
  testing::expect_equal(params[1].second, saved[0].second, "b");
}

TEST(LoadParameters, ListsEveryMismatchAndCopiesNothing) {
  const NamedTensors params = {{"a", at::zeros({2, 3})}, {"b", at::zeros({4})}};
  const NamedTensors saved = {{"a", at::ones({3, 2})}, {"c", at::ones({4})}};
  const std::string message = testing::error_of([&] { load_parameters(params, saved, "iter_0000001/mp_rank_00"); });
  testing::expect_contains(message, {"iter_0000001/mp_rank_00", "a: checkpoint shape [3, 2], model shape [2, 3]",
                                     "b: missing from the checkpoint", "c: in the checkpoint but not in this model"});
  testing::expect_equal(params[0].second, at::zeros({2, 3}), "a untouched");
}

}  // namespace
}  // namespace megatron::checkpoint
