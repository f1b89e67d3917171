// Megatron-Core's own torch_dist checkpoints (megatron_reference.py: GPT-2- and Llama-shaped models
// saved by Megatron-Core's code at TP1, TP2, PP2 and TP2 x PP2, fp32 and bf16) read here: the
// model gives Megatron's per-token losses on the same batch, each rank of another layout reads
// exactly its shard of the whole model, the counters and the run come from Megatron's common state;
// damaged files are refused naming them.
#include "megatron/checkpoint/torch_dist.h"

#include <ATen/ATen.h>

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "megatron/checkpoint/dcp.h"
#include "megatron/checkpoint/reshard.h"
#include "megatron/checkpoint/saved_run.h"
#include "megatron/checkpoint/torch_save.h"
#include "megatron/core/check.h"
#include "megatron/core/strings.h"
#include "megatron/interop/loaded_model.h"
#include "megatron/model/gpt_model.h"
#include "test_support.h"

namespace megatron::checkpoint {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path& reference() { return testing::fixture_reference("megatron_reference", "megatron_reference"); }

json cases() {
  std::ifstream in(reference() / "megatron_reference.json");
  return json::parse(in).at("cases");
}

at::Tensor long_tensor(const json& rows) {
  std::vector<std::int64_t> flat;
  for (const auto& row : rows) {
    for (const auto& v : row) flat.push_back(v.get<std::int64_t>());
  }
  return at::tensor(flat, at::kLong).view({static_cast<std::int64_t>(rows.size()), -1});
}

at::Tensor float_tensor(const json& rows) {
  std::vector<float> flat;
  for (const auto& row : rows) {
    for (const auto& v : row) flat.push_back(v.get<float>());
  }
  return at::tensor(flat, at::kFloat).view({static_cast<std::int64_t>(rows.size()), -1});
}

TEST(TorchDist, MegatronsCheckpointsGiveMegatronsLosses) {
  const json all = cases();
  ASSERT_EQ(all.size(), 7u);
  for (const auto& c : all) {
    const std::string name = c.at("case");
    SCOPED_TRACE(name);
    const interop::LoadedModel loaded = interop::load_model((reference() / name).string());
    EXPECT_EQ(loaded.iteration, c.at("iteration").get<std::int64_t>());
    EXPECT_EQ(loaded.saved_tp, c.at("tp").get<int>());
    EXPECT_EQ(loaded.saved_pp, c.at("pp").get<int>());
    const at::Tensor tokens = long_tensor(c.at("tokens")), labels = long_tensor(c.at("labels"));
    const std::int64_t s = tokens.size(1);
    at::NoGradGuard no_grad;
    const at::Tensor losses =
        loaded.model->forward(tokens, at::arange(s, at::kLong).unsqueeze(0).expand({tokens.size(0), s}), at::Tensor(),
                              labels, model::ForwardContext{false});
    const at::Tensor want = float_tensor(c.at("losses"));
    EXPECT_LT((losses - want).abs().max().item<double>(), 1e-5) << losses << want;
  }
}

// Every rank of TP 2 x PP 2 (and PP 4) reads from each checkpoint exactly its shard of the whole
// model: the stage's layers under their stage-local names, each tensor's TP shard (SwiGLU's fc1 a
// gate and an up block), the tied output layer's copy on the last stage.
TEST(TorchDist, EachRankOfAnotherLayoutReadsItsShard) {
  for (const auto& c : cases()) {
    const std::string name = c.at("case");
    const std::string root = (reference() / name).string();
    const interop::LoadedModel loaded = interop::load_model(root);
    const parallel::NamedTensors whole = loaded.model->checkpoint_tensors();
    const auto layouts = loaded.model->checkpoint_layouts();
    const bool tied = !loaded.config.untie_embeddings_and_output_weights;
    for (const auto& [tp, pp] : {std::pair{2, 2}, std::pair{1, 4}}) {
      const parallel::PipelineLayout layout{loaded.config.num_layers, pp, 1, std::nullopt, std::nullopt};
      for (int p = 0; p < pp; ++p) {
        for (int t = 0; t < tp; ++t) {
          SCOPED_TRACE(str_cat(name, " at TP ", tp, " x PP ", pp, ": TP rank ", t, ", stage ", p));
          parallel::NamedTensors params, want;
          std::vector<parallel::TensorParallelLayout> mine;
          const auto add = [&](const std::string& stage_name, const at::Tensor& full,
                               const parallel::TensorParallelLayout& l) {
            want.emplace_back(stage_name, parallel::shard_of_full(full, l, t, tp));
            params.emplace_back(stage_name, at::empty_like(want.back().second));
            mine.push_back(l);
          };
          for (std::size_t i = 0; i < whole.size(); ++i) {
            const StagePlace place = stage_place(whole[i].first, layout);
            if (place.stage == p) add(place.name, whole[i].second, layouts[i]);
            if (tied && pp > 1 && p == pp - 1 && whole[i].first == "embedding.word_embeddings.weight") {
              add("output_layer.weight", whole[i].second, layouts[i]);
            }
          }
          const ReshardTarget target{.params = params, .layouts = mine, .tp_rank = t, .tp = tp, .pp_rank = p,
                                     .layout = layout};
          const CheckpointState state = load_torch_dist(root, 10, target);
          ASSERT_EQ(state.model.size(), want.size());
          for (std::size_t i = 0; i < want.size(); ++i) {
            EXPECT_EQ(state.model[i].first, want[i].first);
            EXPECT_TRUE(at::equal(state.model[i].second.to(want[i].second.scalar_type()), want[i].second))
                << want[i].first;
          }
        }
      }
    }
  }
}

// Megatron's own writer as the oracle of ours: the model each case loads, written back here by
// every rank of TP 2 x PP 2 (write_torch_dist_shard, one file each), and by the converters' one
// process (save_torch_dist_model), holds every tensor and bytes item Megatron wrote under the same
// key, of the same global shape and values, each chunk once.
TEST(TorchDist, WrittenHereAsMegatronWroteIt) {
  for (const auto& c : cases()) {
    const std::string name = c.at("case");
    SCOPED_TRACE(name);
    const std::string root = (reference() / name).string();
    const interop::LoadedModel loaded = interop::load_model(root);
    const parallel::NamedTensors whole = loaded.model->checkpoint_tensors();
    const auto layouts = loaded.model->checkpoint_layouts();
    const bool tied = !loaded.config.untie_embeddings_and_output_weights;
    const int tp = 2, pp = 2;
    const parallel::PipelineLayout layout{loaded.config.num_layers, pp, 1, std::nullopt, std::nullopt};
    testing::TempDir dir("torch_dist_write");
    const fs::path ranks = dir.path() / "ranks", converted = dir.path() / "converted";
    fs::create_directories(ranks);
    std::vector<DcpEntry> entries;
    for (int p = 0; p < pp; ++p) {
      for (int t = 0; t < tp; ++t) {
        parallel::NamedTensors params;
        std::vector<parallel::TensorParallelLayout> mine;
        const auto add = [&](const std::string& stage_name, const at::Tensor& full, const parallel::TensorParallelLayout& l) {
          params.emplace_back(stage_name, parallel::shard_of_full(full, l, t, tp));
          mine.push_back(l);
        };
        for (std::size_t i = 0; i < whole.size(); ++i) {
          const StagePlace place = stage_place(whole[i].first, layout);
          if (place.stage == p) add(place.name, whole[i].second, layouts[i]);
          if (tied && p == pp - 1 && whole[i].first == "embedding.word_embeddings.weight") {
            add("output_layer.weight", whole[i].second, layouts[i]);
          }
        }
        const ReshardTarget target{.params = params, .layouts = mine, .tp_rank = t, .tp = tp, .pp_rank = p,
                                   .layout = layout};
        const auto written = write_torch_dist_shard(ranks.string(), str_cat("__", p * tp + t, "_0.distcp"), params,
                                                    plan_torch_dist(target, loaded.config, true));
        entries.insert(entries.end(), written.begin(), written.end());
      }
    }
    write_dcp_metadata(ranks.string(), entries);  // throws for a chunk written twice
    CheckpointState common = loaded.saved;
    save_torch_dist_model(converted.string(), common, whole, layouts, loaded.config,
                          SavedLayout{.format = CheckpointFormat::kTorchDist, .tp = 2, .pp = 1, .etp = 2, .config = {}});
    const DcpCheckpoint megatron(iteration_folder(root, 10));
    for (const fs::path& folder : {ranks, converted / "iter_0000010"}) {
      SCOPED_TRACE(folder.string());
      const DcpCheckpoint ours(folder.string());
      for (const auto& [key, t] : megatron.tensors()) {
        ASSERT_TRUE(ours.tensors().contains(key)) << key;
        EXPECT_EQ(ours.tensors().at(key).size, t.size) << key;
        std::int64_t covered = 0;
        for (const DcpChunk& chunk : ours.tensors().at(key).chunks) covered += c10::multiply_integers(chunk.sizes);
        EXPECT_EQ(covered, c10::multiply_integers(t.size)) << key << ": every element in one chunk";
        EXPECT_TRUE(at::equal(ours.read(key), megatron.read(key).to(at::kFloat))) << key;
      }
      for (const auto& [key, item] : megatron.bytes_items()) {
        ASSERT_TRUE(ours.bytes_items().contains(key)) << key;
        // Each a torch.save archive of the layer's extra state ([None]): the same object.
        EXPECT_EQ(TorchSaveArchive::from_bytes(ours.read_bytes(key), "ours").root().repr(),
                  TorchSaveArchive::from_bytes(megatron.read_bytes(key), "Megatron's").root().repr())
            << key;
      }
    }
    const TorchDistRun run = read_torch_dist_run(converted.string(), 10);
    EXPECT_EQ(run.state.consumed_train_samples, 80);
    EXPECT_EQ(run.state.scheduler, loaded.saved.scheduler);
    EXPECT_EQ(run.state.config, loaded.saved.config);  // the run's own record, exactly
    EXPECT_EQ(run.layout.tp, 2);
    EXPECT_EQ(run.args.at("num_layers"), 4);
    EXPECT_EQ(run.args.at("padded_vocab_size"), 128);
  }
}

// The counters and the run come from Megatron's common state (common.pt's args Namespace).
TEST(TorchDist, CountersAndTheRunComeFromMegatronsArgs) {
  const TorchDistRun run = read_torch_dist_run((reference() / "llama_tp2_pp2_fp32").string(), 10);
  EXPECT_EQ(run.state.iteration, 10);
  EXPECT_EQ(run.state.consumed_train_samples, 80);
  EXPECT_EQ(run.state.consumed_valid_samples, 16);
  EXPECT_EQ(run.state.scheduler_num_steps, 80);
  EXPECT_EQ(run.state.scheduler.at("lr_decay_style"), "cosine");
  EXPECT_DOUBLE_EQ(run.state.floating_point_operations_so_far, 123456789.0);
  EXPECT_EQ(run.layout.format, CheckpointFormat::kTorchDist);
  EXPECT_EQ(run.layout.tp, 2);
  EXPECT_EQ(run.layout.pp, 2);
  EXPECT_TRUE(run.args.at("params_dtype").is_null());  // torch.float32: not a plain value
  const model::ModelConfig config = SavedRun::from_json(run.state.config, "test").model_config("test");
  EXPECT_EQ(config.num_layers, 4);
  EXPECT_EQ(config.num_query_groups, 2);
  EXPECT_EQ(config.ffn_hidden_size, 96);
  EXPECT_TRUE(config.swiglu);
  EXPECT_TRUE(config.untie_embeddings_and_output_weights);
  EXPECT_EQ(config.padded_vocab_size, 128);
  const SavedRun saved = SavedRun::from_json(run.state.config, "test");
  ASSERT_TRUE(saved.vocab_padding.has_value());
  EXPECT_EQ(saved.vocab_padding->divisible_by, 16);
  EXPECT_EQ(saved.vocab_padding->tp, 2);
}

// A damaged checkpoint is refused naming the file: a .distcp cut short, metadata.json naming
// another backend, the common state missing or without its args.
TEST(TorchDist, DamagedCheckpointsAreRefusedNamingTheFile) {
  const testing::TempDir dir;
  const auto damaged = [&](const std::string& what, const std::function<void(const fs::path&)>& damage,
                           const std::string& expected) {
    SCOPED_TRACE(what);
    const fs::path root = dir.path() / what;
    fs::copy(reference() / "gpt2_tp1_pp1_fp32", root, fs::copy_options::recursive);
    damage(root / "iter_0000010");
    try {
      interop::load_model(root.string());
      ADD_FAILURE() << "loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  damaged("truncated", [](const fs::path& f) { fs::resize_file(f / "__0_1.distcp", 1000); }, "__0_1.distcp");
  damaged("backend", [](const fs::path& f) {
    std::ofstream(f / "metadata.json") << R"({"sharded_backend": "zarr", "sharded_backend_version": 1})";
  }, "sharded_backend 'zarr' is not read");
  damaged("no_common", [](const fs::path& f) { fs::remove(f / "common.pt"); }, "has neither common.pt nor a common_state");
  damaged("not_json", [](const fs::path& f) { std::ofstream(f / "metadata.json") << "{"; }, "metadata.json: not JSON");
}

}  // namespace
}  // namespace megatron::checkpoint
