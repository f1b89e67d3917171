// The resharder against Megatron's partitioning written out by hand: a checkpoint of one TP x PP
// layout loaded into another gives every rank the block of each full tensor that Megatron's
// layers.py assigns it (column-parallel rows, row-parallel columns, SwiGLU's gate and up halves
// each, vocabulary rows) and finds every layer where Megatron's layer offsets put it (even,
// uneven and interleaved splits). Every element of the saved tensors is distinct, so a misplaced
// block cannot pass. Single process: the checkpoints of several ranks are written by hand.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "megatron/checkpoint/checkpoint.h"
#include "megatron/checkpoint/reshard.h"
#include "megatron/model/gpt_model.h"
#include "megatron/parallel/single_process_context.h"
#include "model/tiny_model_config.h"
#include "tensor_expect.h"
#include "test_support.h"

namespace megatron::checkpoint {
namespace {

using parallel::PipelineLayout;
using testing::expect_equal;

// 4 layers, SwiGLU, 4 query heads in 2 groups, biases, untied: every kind of split shows.
model::ModelConfig swiglu_config() {
  model::ModelConfig c = testing::tiny_config();
  c.num_layers = 4;
  c.position_embedding = model::PositionEmbedding::kRope;
  c.normalization = model::Normalization::kRmsNorm;
  c.swiglu = true;
  c.ffn_hidden_size = 64;
  c.num_query_groups = 2;
  c.untie_embeddings_and_output_weights = true;
  return c;
}

// A single-process model: its parameter names and TP layouts, and distinct values for each
// element (parameter i holds 10000 i + 0, 1, 2, ...; exact in fp32).
struct Full {
  explicit Full(const model::ModelConfig& c) {
    const parallel::ParameterInit init(1);
    model = std::make_unique<model::GptModel>(c, parallel::single_process_context(), init);
    float base = 0;
    for (const auto& [name, t] : model->named_parameters()) {
      values.emplace_back(name, at::arange(t.numel(), at::kFloat).view(t.sizes()) + base);
      base += 10000;
    }
  }
  const NamedTensors& names() const { return model->named_parameters(); }
  const std::vector<parallel::TensorParallelLayout>& layouts() const { return model->parameter_layouts(); }
  at::Tensor operator[](const std::string& name) const {
    for (const auto& [n, t] : values) {
      if (n == name) return t;
    }
    ADD_FAILURE() << "no parameter " << name;
    return {};
  }

  std::unique_ptr<model::GptModel> model;
  NamedTensors values;
};

// Rank r's block of `full` among `tp`, by Megatron's rules for the parameter `name`.
at::Tensor megatron_shard(const std::string& name, const at::Tensor& full, int r, int tp, bool swiglu) {
  auto block = [&](const at::Tensor& t, int dim) {
    const std::int64_t n = t.size(dim) / tp;
    return t.slice(dim, r * n, (r + 1) * n);
  };
  if (swiglu && (name.ends_with("linear_fc1.weight") || name.ends_with("linear_fc1.bias"))) {
    const std::int64_t half = full.size(0) / 2;  // [gate; up]: rank r holds [gate block r; up block r]
    return at::cat({block(full.slice(0, 0, half), 0), block(full.slice(0, half, 2 * half), 0)});
  }
  // QKV rows are grouped per query group, so a block of rows is a block of whole groups.
  for (const char* rows : {"linear_qkv.weight", "linear_qkv.bias", "linear_fc1.weight", "linear_fc1.bias",
                           "word_embeddings.weight", "output_layer.weight"}) {
    if (name.ends_with(rows)) return block(full, 0);
  }
  for (const char* columns : {"linear_proj.weight", "linear_fc2.weight"}) {
    if (name.ends_with(columns)) return block(full, 1);
  }
  return full;  // norms, row-parallel biases, position embeddings
}

NamedTensors shards_of(const NamedTensors& full, int r, int tp, bool swiglu) {
  NamedTensors out;
  for (const auto& [name, t] : full) out.emplace_back(name, megatron_shard(name, t, r, tp, swiglu).contiguous());
  return out;
}

// A one-shard (TP 1, PP 1) checkpoint of `values` at iteration 1, optionally with optimizer state.
void save_tp1(const std::string& root, const NamedTensors& values, const NamedTensors& optimizer = {}) {
  CheckpointState s;
  s.iteration = 1;
  s.config = {{"num_layers", 4}};
  s.model = values;
  s.optimizer = optimizer;
  save_checkpoint(root, s, "mp_rank_00");
}

void save_shards(const std::string& root, const std::vector<std::pair<std::string, NamedTensors>>& shards) {
  CheckpointState common;
  common.iteration = 1;
  save_model_shards(root, common, shards);
}

// Each loaded tensor equals the expected one of the same name.
void expect_tensors(const NamedTensors& got, const NamedTensors& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first) << what;
    expect_equal(got[i].second, want[i].second, what + ": " + want[i].first);
  }
}

TEST(Reshard, Tp1CheckpointCutsIntoMegatronsTp2Shards) {
  testing::TempDir dir("reshard");
  const Full full(swiglu_config());
  save_tp1(dir / "ckpt", full.values);
  const PipelineLayout one{4, 1, 1, std::nullopt, std::nullopt};
  for (const int r : {0, 1}) {
    const NamedTensors expected = shards_of(full.values, r, 2, true);
    const ReshardTarget target{expected, full.layouts(), r, 2, 0, one};  // this rank's names and shapes
    const CheckpointState got = load_resharded(dir / "ckpt", 1, {1, one, false}, target, false);
    expect_tensors(got.model, expected, "TP 2 rank " + std::to_string(r));
    // Spelled out for one tensor: rank r's QKV rows are query group r whole (2 query heads, its
    // key and value head, 12 rows each): rows 48 r .. 48 r + 47 of the fused weight.
    const std::string qkv = "decoder.layers.2.self_attention.linear_qkv.weight";
    for (const auto& [name, t] : got.model) {
      if (name == qkv) expect_equal(t, full[qkv].slice(0, 48 * r, 48 * (r + 1)), "query group " + std::to_string(r));
    }
  }
}

TEST(Reshard, Tp2ShardsJoinBackIntoTheFullTensors) {
  testing::TempDir dir("reshard");
  const Full full(swiglu_config());
  save_shards(dir / "ckpt", {{"mp_rank_00", shards_of(full.values, 0, 2, true)},
                             {"mp_rank_01", shards_of(full.values, 1, 2, true)}});
  const PipelineLayout one{4, 1, 1, std::nullopt, std::nullopt};
  const CheckpointState got =
      load_resharded(dir / "ckpt", 1, {2, one, false}, {full.names(), full.layouts(), 0, 1, 0, one}, false);
  expect_tensors(got.model, full.values, "TP 2 to TP 1");
}

TEST(Reshard, OptimizerStateIsJoinedAndCutLikeItsParameter) {
  testing::TempDir dir("reshard");
  const Full full(swiglu_config());
  // Each state in two flat pieces (a distributed optimizer's ranges): "<name>/<key>/<offset>".
  NamedTensors optimizer;
  const char* keys[] = {"param", "exp_avg", "exp_avg_sq"};
  for (const auto& [name, t] : full.values) {
    for (int k = 0; k < 3; ++k) {
      const at::Tensor flat = (t + 0.25 * (k + 1)).reshape({-1});
      const std::int64_t cut = flat.numel() / 3;
      optimizer.emplace_back(name + "/" + keys[k] + "/0", flat.slice(0, 0, cut).clone());
      optimizer.emplace_back(name + "/" + keys[k] + "/" + std::to_string(cut), flat.slice(0, cut).clone());
    }
  }
  save_tp1(dir / "ckpt", full.values, optimizer);
  const PipelineLayout one{4, 1, 1, std::nullopt, std::nullopt};
  const NamedTensors mine = shards_of(full.values, 1, 2, true);
  const CheckpointState got =
      load_resharded(dir / "ckpt", 1, {1, one, false}, {mine, full.layouts(), 1, 2, 0, one}, true);
  ASSERT_EQ(got.optimizer_parts.size(), 1u);
  NamedTensors expected;
  for (const auto& [name, t] : full.values) {
    for (int k = 0; k < 3; ++k) {
      expected.emplace_back(name + "/" + keys[k] + "/0",
                            megatron_shard(name, t + 0.25 * (k + 1), 1, 2, true).reshape({-1}));
    }
  }
  expect_tensors(got.optimizer_parts[0], expected, "TP 2 rank 1 optimizer state");
}

// `values` renamed for a stage: layer `from + i` becomes "<prefix>decoder.layers.<i>.", and the
// other tensors chosen by `keep` get the prefix.
NamedTensors stage_tensors(const NamedTensors& values, int from, int count, const std::string& prefix,
                           const std::vector<std::string>& keep) {
  NamedTensors out;
  for (const auto& [name, t] : values) {
    for (int i = 0; i < count; ++i) {
      const std::string layer = "decoder.layers." + std::to_string(from + i) + ".";
      if (name.starts_with(layer)) {
        out.emplace_back(prefix + "decoder.layers." + std::to_string(i) + "." + name.substr(layer.size()), t);
      }
    }
    for (const std::string& k : keep) {
      if (name.starts_with(k)) out.emplace_back(prefix + name, t);
    }
  }
  return out;
}

TEST(Reshard, Pp2CheckpointJoinsIntoOneStage) {
  testing::TempDir dir("reshard");
  const Full full(swiglu_config());
  const NamedTensors first = stage_tensors(full.values, 0, 2, "", {"embedding."});
  const NamedTensors last = stage_tensors(full.values, 2, 2, "", {"decoder.final", "output_layer"});
  save_shards(dir / "ckpt", {{"mp_rank_00_000", first}, {"mp_rank_00_001", last}});
  const PipelineLayout saved{4, 2, 1, std::nullopt, std::nullopt}, one{4, 1, 1, std::nullopt, std::nullopt};
  const CheckpointState got =
      load_resharded(dir / "ckpt", 1, {1, saved, false}, {full.names(), full.layouts(), 0, 1, 0, one}, false);
  expect_tensors(got.model, full.values, "PP 2 to PP 1");
}

TEST(Reshard, InterleavedStagesFindEachLayerInItsChunk) {
  // 4 layers over 2 stages x 2 chunks: chunk 0 of both stages first (layers 0, 1), then chunk 1
  // (layers 2, 3): stage 0 holds layers 0 and 2, stage 1 layers 1 and 3.
  testing::TempDir dir("reshard");
  const Full full(swiglu_config());
  NamedTensors stage0 = stage_tensors(full.values, 0, 1, "model0.", {"embedding."});
  NamedTensors stage1 = stage_tensors(full.values, 1, 1, "model0.", {});
  for (auto& t : stage_tensors(full.values, 2, 1, "model1.", {})) stage0.push_back(t);
  for (auto& t : stage_tensors(full.values, 3, 1, "model1.", {"decoder.final", "output_layer"})) stage1.push_back(t);
  save_shards(dir / "ckpt", {{"mp_rank_00_000", stage0}, {"mp_rank_00_001", stage1}});
  const PipelineLayout interleaved{4, 2, 2, std::nullopt, std::nullopt}, one{4, 1, 1, std::nullopt, std::nullopt};
  const CheckpointState joined =
      load_resharded(dir / "ckpt", 1, {1, interleaved, false}, {full.names(), full.layouts(), 0, 1, 0, one}, false);
  expect_tensors(joined.model, full.values, "PP 2 x 2 chunks to PP 1");

  // And back: stage 1 of the interleaved split, from the PP 1 checkpoint, holds layers 1 and 3.
  testing::TempDir flat("reshard");
  save_tp1(flat / "ckpt", full.values);
  const NamedTensors wanted = {
      {"model0.decoder.layers.0.mlp.linear_fc2.weight", full["decoder.layers.1.mlp.linear_fc2.weight"]},
      {"model1.decoder.layers.0.input_layernorm.weight", full["decoder.layers.3.input_layernorm.weight"]},
      {"model1.decoder.final_layernorm.weight", full["decoder.final_layernorm.weight"]},
      {"model1.output_layer.weight", full["output_layer.weight"]}};
  const std::vector<parallel::TensorParallelLayout> layouts(wanted.size());  // TP 1: any layout is whole
  const CheckpointState stage =
      load_resharded(flat / "ckpt", 1, {1, one, false}, {wanted, layouts, 0, 1, 1, interleaved}, false);
  expect_tensors(stage.model, wanted, "PP 1 to stage 1 of PP 2 x 2 chunks");
}

TEST(Reshard, TiedOutputLayerOfAnUnpipelinedCheckpointIsTheWordEmbedding) {
  testing::TempDir dir("reshard");
  model::ModelConfig c = swiglu_config();
  c.untie_embeddings_and_output_weights = false;
  const Full full(c);
  save_tp1(dir / "ckpt", full.values);  // no output_layer.weight: the embedding serves
  const PipelineLayout one{4, 1, 1, std::nullopt, std::nullopt}, two{4, 2, 1, std::nullopt, std::nullopt};
  // The last of 2 stages at TP 2, rank 1: layer 3 as its layer 1, and its copy of the embedding.
  const at::Tensor embedding = full["embedding.word_embeddings.weight"];
  const NamedTensors wanted = {
      {"decoder.layers.1.input_layernorm.weight", full["decoder.layers.3.input_layernorm.weight"]},
      {"decoder.layers.1.self_attention.linear_proj.weight",
       full["decoder.layers.3.self_attention.linear_proj.weight"].slice(1, 24, 48)},
      {"output_layer.weight", embedding.slice(0, 48, 96)}};
  const std::vector<parallel::TensorParallelLayout> layouts = {{-1, 1, false, false}, {1, 1, false, false},
                                                               {0, 1, false, true}};
  const CheckpointState got = load_resharded(dir / "ckpt", 1, {1, one, true}, {wanted, layouts, 1, 2, 1, two}, false);
  expect_tensors(got.model, wanted, "tied, TP 2 rank 1 of stage 1");
}

TEST(Reshard, RefusesATensorThatDoesNotFitNamingIt) {
  testing::TempDir dir("reshard");
  const Full full(swiglu_config());
  save_tp1(dir / "ckpt", full.values);
  model::ModelConfig bigger = swiglu_config();
  bigger.padded_vocab_size = 128;
  const Full other(bigger);
  const PipelineLayout one{4, 1, 1, std::nullopt, std::nullopt};
  const std::string message = testing::error_of(
      [&] { load_resharded(dir / "ckpt", 1, {1, one, false}, {other.names(), other.layouts(), 0, 1, 0, one}, false); });
  testing::expect_contains(message, {"cannot reshard embedding.word_embeddings.weight", "[96, 48]", "[128, 48]",
                                     "padded vocabulary"});
}

}  // namespace
}  // namespace megatron::checkpoint
