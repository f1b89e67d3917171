// Checkpoints written by many ranks under mpirun (2, 4 and 8 ranks, TP 2 x DP world/2 with the
// distributed optimizer): every shard folder and every DP rank's optimizer file lands in the
// committed folder, tracker last, and each loads back; a folder that some ranks do not see (each
// rank given its own view of --save, as node-local storage would) is refused on every rank
// without a tracker, instead of committing a checkpoint that cannot be loaded. The same for a
// Megatron-Core torch_dist save (--ckpt-format torch_dist): each rank's chunks of the global
// tensors in its own .distcp file, each chunk written once, rank 0's metadata naming them all.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "megatron/checkpoint/checkpoint.h"
#include "megatron/checkpoint/dcp.h"
#include "megatron/checkpoint/saved_run.h"
#include "megatron/checkpoint/shard_name.h"
#include "megatron/checkpoint/torch_dist.h"
#include "megatron/core/check.h"
#include "megatron/parallel/parallel_context.h"
#include "mpi_test_support.h"

namespace megatron::checkpoint {
namespace {

namespace fs = std::filesystem;
using parallel::Communicator;
using parallel::ParallelContext;

Communicator& world() { return testing::world(); }

const ParallelContext& tp2_context() {
  static std::unique_ptr<parallel::ParallelState> state;
  static ParallelContext pc;
  if (!state) {
    state = std::make_unique<parallel::ParallelState>(
        parallel::ParallelConfig{world().world_size(), 2, 1, 1, false}, world().rank());
    pc = ParallelContext::create(*state, world());
  }
  return pc;
}

// A fresh folder made by rank 0, its name sent to every rank.
std::string shared_temp_folder() {
  std::string name(64, '\0');
  if (world().rank() == 0) {
    char pattern[] = "/tmp/megatron-ckpt-mpi.XXXXXX";
    MEGATRON_CHECK(::mkdtemp(pattern) != nullptr, "mkdtemp failed");
    name.replace(0, std::string(pattern).size(), pattern);
  }
  at::Tensor chars = at::zeros({64}, at::kByte);
  for (std::size_t i = 0; i < name.size(); ++i) chars[static_cast<std::int64_t>(i)] = static_cast<std::uint8_t>(name[i]);
  world().broadcast(chars, 0, *world().world()).wait();
  std::string out;
  for (std::int64_t i = 0; i < 64 && chars[i].item<std::uint8_t>() != 0; ++i) {
    out.push_back(static_cast<char>(chars[i].item<std::uint8_t>()));
  }
  return out;
}

// This rank's part of a checkpoint: its TP shard's model (DP rank 0 writes it) and its optimizer piece.
CheckpointState rank_state(const ParallelContext& pc) {
  CheckpointState s;
  s.iteration = 7;
  s.config = {{"num_layers", 2}};
  s.model = {{"decoder.final_layernorm.weight", at::full({4}, static_cast<float>(pc.state->tp_rank()))}};
  s.optimizer = {{str_cat("w/param/", pc.state->dp_rank()), at::full({3}, static_cast<float>(world().rank()))}};
  s.rng = {{"default", at::arange(4, at::kByte)}};
  return s;
}

ShardWriter rank_writer(const ParallelContext& pc) {
  ShardWriter w;
  w.shard = ShardName::of(*pc.state).str();
  w.model = pc.state->dp_rank() == 0;
  w.distributed_optimizer = true;
  w.dp_rank = pc.state->dp_rank();
  w.dp_size = pc.state->dp();
  return w;
}

TEST(CheckpointMpi, EveryRanksFilesAreCommittedTogether) {
  if (world().world_size() % 2 != 0) GTEST_SKIP() << "needs an even number of ranks";
  const ParallelContext& pc = tp2_context();
  const std::string root = shared_temp_folder() + "/ckpt";
  save_checkpoint(root, rank_state(pc), rank_writer(pc), pc);
  world().barrier(*pc.world).wait();
  EXPECT_EQ(read_tracker(root), 7);
  const SavedLayout layout = read_layout(root, 7);
  EXPECT_EQ(layout.tp, 2);
  EXPECT_EQ(layout.dp, pc.state->dp());
  EXPECT_TRUE(layout.distributed_optimizer);
  const CheckpointState back = load_checkpoint(root, 7, ShardName::of(*pc.state).str(), true, true);
  ASSERT_EQ(back.optimizer_parts.size(), static_cast<std::size_t>(pc.state->dp()));
  for (const auto& part : back.optimizer_parts) {
    ASSERT_EQ(part.size(), 1u);
    // Piece "w/param/d" came from the rank with DP rank d of this TP rank's shard.
    const int d = std::stoi(part[0].first.substr(8));
    const int writer = pc.state->tp_rank() + 2 * d;
    EXPECT_TRUE(at::equal(part[0].second, at::full({3}, static_cast<float>(writer)))) << part[0].first;
  }
  EXPECT_TRUE(at::equal(back.model[0].second, at::full({4}, static_cast<float>(pc.state->tp_rank()))));
  // Only the pieces a filter keeps are read.
  const CheckpointState mine = load_checkpoint(root, 7, ShardName::of(*pc.state).str(), true, false,
                                               [&](const std::string& name, std::int64_t) {
                                                 return name == str_cat("w/param/", pc.state->dp_rank());
                                               });
  std::size_t pieces = 0;
  for (const auto& part : mine.optimizer_parts) pieces += part.size();
  EXPECT_EQ(pieces, 1u);
  world().barrier(*pc.world).wait();
  if (world().rank() == 0) fs::remove_all(fs::path(root).parent_path());
}

TEST(CheckpointMpi, AFolderSomeRanksDoNotSeeIsRefusedOnEveryRank) {
  if (world().world_size() % 2 != 0) GTEST_SKIP() << "needs an even number of ranks";
  const ParallelContext& pc = tp2_context();
  const std::string base = shared_temp_folder();
  // TP rank 1 writes into another folder than TP rank 0, as it would on a node-local --save.
  const std::string root = base + "/view" + std::to_string(pc.state->tp_rank());
  std::string message;
  try {
    save_checkpoint(root, rank_state(pc), rank_writer(pc), pc);
  } catch (const Error& e) {
    message = e.what();
  }
  world().barrier(*pc.world).wait();
  if (world().rank() == 0) {
    EXPECT_NE(message.find("mp_rank_01/meta.json, written by another rank, is not in"), std::string::npos) << message;
    EXPECT_NE(message.find("--save must be a folder every rank sees"), std::string::npos) << message;
  } else {
    EXPECT_NE(message.find("could not be committed by rank 0"), std::string::npos) << message;
  }
  EXPECT_FALSE(fs::exists(base + "/view0/" + kTrackerFile));
  EXPECT_FALSE(fs::exists(base + "/view0/iter_0000007"));
  world().barrier(*pc.world).wait();
  if (world().rank() == 0) fs::remove_all(base);
}

// A torch_dist save of a TP-split output layer (rank t holds rows [2t, 2t + 2) of 4) and a
// replicated final norm, by every rank of TP 2 x DP world/2.
struct TorchDistSave {
  NamedTensors params;
  std::vector<parallel::TensorParallelLayout> layouts{parallel::TensorParallelLayout{}, {.partition_dim = 0}};
  model::ModelConfig model;
  CheckpointState state;
  ShardWriter writer;
  explicit TorchDistSave(const ParallelContext& pc) {
    const int t = pc.state->tp_rank();
    params = {{"decoder.final_layernorm.weight", at::full({4}, 5.0f)},
              {"output_layer.weight", at::arange(2 * t * 3, (2 * t + 2) * 3, at::kFloat).reshape({2, 3})}};
    model.untie_embeddings_and_output_weights = true;
    SavedRun run;
    run.model = model;
    state.iteration = 7;
    state.consumed_train_samples = 56;
    state.config = run.to_json();
    state.model = params;
    const parallel::PipelineLayout whole{model.num_layers, 1, 1, std::nullopt, std::nullopt};
    const ReshardTarget target{.params = params, .layouts = layouts, .tp_rank = t, .tp = 2, .pp_rank = 0,
                               .layout = whole};
    auto plan = std::make_shared<TorchDistPlan>(plan_torch_dist(target, model, pc.state->dp_rank() == 0));
    plan->layout.format = CheckpointFormat::kTorchDist;
    plan->layout.tp = 2;
    plan->layout.dp = pc.state->dp();
    writer = rank_writer(pc);
    writer.torch_dist = std::move(plan);
  }
};

TEST(CheckpointMpi, TorchDistChunksOfEveryRankAreCommittedTogether) {
  if (world().world_size() % 2 != 0) GTEST_SKIP() << "needs an even number of ranks";
  const ParallelContext& pc = tp2_context();
  const std::string root = shared_temp_folder() + "/ckpt";
  const TorchDistSave save(pc);
  save_checkpoint(root, save.state, save.writer, pc);
  world().barrier(*pc.world).wait();
  EXPECT_EQ(read_tracker(root), 7);
  const std::string folder = iteration_folder(root, 7);
  EXPECT_TRUE(is_torch_dist(folder));
  // The two DP-rank-0 ranks wrote; the norm once (TP rank 0), the output layer's rows by both.
  EXPECT_TRUE(fs::exists(folder + "/__0_0.distcp"));
  EXPECT_TRUE(fs::exists(folder + "/__1_0.distcp"));
  EXPECT_FALSE(fs::exists(folder + "/__2_0.distcp"));
  const DcpCheckpoint dcp(folder);
  EXPECT_EQ(dcp.tensors().at("decoder.final_layernorm.weight").chunks.size(), 1u);
  EXPECT_TRUE(at::equal(dcp.read("output_layer.weight"), at::arange(12, at::kFloat).reshape({4, 3})));
  EXPECT_TRUE(at::equal(dcp.read("decoder.final_layernorm.weight"), at::full({4}, 5.0f)));
  const TorchDistRun run = read_torch_dist_run(root, 7);
  EXPECT_EQ(run.state.consumed_train_samples, 56);
  EXPECT_EQ(run.layout.tp, 2);
  EXPECT_EQ(run.layout.dp, pc.state->dp());
  world().barrier(*pc.world).wait();
  if (world().rank() == 0) fs::remove_all(fs::path(root).parent_path());
}

TEST(CheckpointMpi, ATorchDistFolderSomeRanksDoNotSeeIsRefusedOnEveryRank) {
  if (world().world_size() % 2 != 0) GTEST_SKIP() << "needs an even number of ranks";
  const ParallelContext& pc = tp2_context();
  const std::string base = shared_temp_folder();
  const std::string root = base + "/view" + std::to_string(pc.state->tp_rank());
  const TorchDistSave save(pc);
  std::string message;
  try {
    save_checkpoint(root, save.state, save.writer, pc);
  } catch (const Error& e) {
    message = e.what();
  }
  world().barrier(*pc.world).wait();
  // The ranks of TP rank 1 do not find the temporary folder rank 0 made; every rank fails.
  if (pc.state->tp_rank() == 1) {
    EXPECT_NE(message.find("made by rank 0, is not there as rank"), std::string::npos) << message;
    EXPECT_NE(message.find("--save must be a folder every rank sees"), std::string::npos) << message;
  } else {
    EXPECT_NE(message.find("failed on rank(s) 1"), std::string::npos) << message;
  }
  EXPECT_FALSE(fs::exists(base + "/view0/" + kTrackerFile));
  EXPECT_FALSE(fs::exists(base + "/view0/iter_0000007"));
  world().barrier(*pc.world).wait();
  if (world().rank() == 0) fs::remove_all(base);
}

}  // namespace
}  // namespace megatron::checkpoint
