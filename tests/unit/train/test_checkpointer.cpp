// The trainer's checkpoints in one process: Megatron's save lines, retention after each commit, the
// commit callback, async saves committed by a later poll, the --save folder's lock, and --load
// (Megatron's warning without a tracker, a tiny GPT's parameters and counters restored, a
// checkpoint of another model refused by its differences).
#include "megatron/train/checkpointer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "megatron/model/gpt_model.h"
#include "megatron/parallel/single_process_context.h"
#include "megatron/tokenizer/tokenizer_files.h"
#include "model/tiny_model_config.h"
#include "test_support.h"

namespace megatron::train {
namespace {

namespace fs = std::filesystem;
using megatron::testing::error_of;
using megatron::testing::expect_contains;
using megatron::testing::TempDir;

const parallel::ParallelContext& pc() { return parallel::single_process_context(); }

// What the trainer saves: the run configuration with its "model", the counters and the tensors.
checkpoint::CheckpointState state_at(std::int64_t iteration, const model::ModelConfig& config,
                                     const parallel::NamedTensors& params) {
  checkpoint::CheckpointState s;
  s.iteration = iteration;
  s.consumed_train_samples = 8 * iteration;
  s.consumed_valid_samples = 3 * iteration;
  s.scheduler_num_steps = 8 * iteration;
  s.optimizer_steps = iteration;
  s.floating_point_operations_so_far = 0.25 * static_cast<double>(iteration);
  s.config = {{"num_layers", config.num_layers}, {"model", config.to_json()}};
  s.model = params;
  s.optimizer = {{"decoder.final_layernorm.weight.exp_avg", at::full({config.hidden_size}, 0.5f)}};
  s.rng = {{"default", at::arange(16, at::kByte)}};
  return s;
}

checkpoint::CheckpointState small_state(std::int64_t iteration) {
  return state_at(iteration, testing::tiny_config(), {{"decoder.final_layernorm.bias", at::full({4}, 1.0f * iteration)}});
}

std::vector<std::string> iteration_folders(const std::string& root) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(root)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("iter_", 0) == 0) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(Checkpointer, KeepsTheLastTwoSavesAndPrintsMegatronsLines) {
  TempDir dir("checkpointer");
  const std::string root = dir / "ckpt";
  CheckpointPlan plan;
  plan.save = root;
  plan.retention.keep_last = 2;
  std::ostringstream out;
  Checkpointer checkpointer(plan, pc(), false, out, take_save_folder(root, out));
  EXPECT_TRUE(checkpointer.saves());
  std::vector<std::size_t> lines_seen_by_callback;
  checkpointer.on_commit([&] { lines_seen_by_callback.push_back(count(out.str(), "successfully saved")); });
  for (std::int64_t it = 1; it <= 4; ++it) checkpointer.save(small_state(it));

  EXPECT_EQ(iteration_folders(root), (std::vector<std::string>{"iter_0000003", "iter_0000004"}));
  EXPECT_EQ(checkpoint::read_tracker(root), 4);
  // Megatron: '  successfully saved checkpoint from iteration {:7d} to {} [ t {}/{}, p {}/{} ]'.
  for (const char* it : {"1", "2", "3", "4"}) {
    expect_contains(out.str(), {std::string("saving checkpoint at iteration       ") + it + " to " + root,
                                std::string("] successfully saved checkpoint from iteration       ") + it + " to " +
                                    root + " [ t 1/1, p 1/1 ]\n"});
  }
  expect_contains(out.str(), {"  removed checkpoint " + root + "/iter_0000001", "  removed checkpoint " + root +
                                                                                    "/iter_0000002"});
  EXPECT_EQ(count(out.str(), "removed checkpoint"), 2u);
  // Once per commit, each before its success line.
  EXPECT_EQ(lines_seen_by_callback, (std::vector<std::size_t>{0, 1, 2, 3}));
}

TEST(Checkpointer, AnAsyncSaveIsCommittedByALaterPoll) {
  TempDir dir("checkpointer");
  const std::string root = dir / "ckpt";
  CheckpointPlan plan;
  plan.save = root;
  plan.async_save = true;
  std::ostringstream out;
  Checkpointer checkpointer(plan, pc(), false, out, take_save_folder(root, out));
  int commits = 0;
  checkpointer.on_commit([&] { ++commits; });

  checkpointer.save(small_state(5));
  EXPECT_EQ(checkpoint::read_tracker(root), std::nullopt) << "not committed before a poll";
  EXPECT_EQ(commits, 0);
  expect_contains(out.str(), {"to " + root + " in megatron-cpp format (async)",
                              "scheduled an async checkpoint save at iteration       5"});
  EXPECT_EQ(count(out.str(), "successfully saved"), 0u);

  checkpointer.poll(/*blocking=*/true);
  EXPECT_EQ(checkpoint::read_tracker(root), 5);
  EXPECT_EQ(commits, 1);
  expect_contains(out.str(), {"successfully saved checkpoint from iteration       5 to " + root});
  checkpointer.poll(true);  // nothing in flight
  EXPECT_EQ(commits, 1);

  // The next save commits the one in flight first; the tracker follows only the commits.
  checkpointer.save(small_state(6));
  checkpointer.save(small_state(7));
  EXPECT_EQ(checkpoint::read_tracker(root), 6);
  EXPECT_EQ(commits, 2);
  checkpointer.poll(true);
  EXPECT_EQ(checkpoint::read_tracker(root), 7);
  EXPECT_EQ(commits, 3);
  const auto loaded = checkpoint::load_checkpoint(root, 7, "mp_rank_00", true, true);
  EXPECT_TRUE(at::equal(loaded.model[0].second, at::full({4}, 7.0f)));  // the snapshot of iteration 7
}

TEST(Checkpointer, ASecondRunCannotTakeTheSaveFolderWhileTheFirstHoldsIt) {
  TempDir dir("checkpointer");
  const std::string root = dir / "ckpt";
  std::ostringstream out;
  const auto first = take_save_folder(root, out);
  const std::string message = error_of([&] { take_save_folder(root, out); });
  expect_contains(message, {"--save " + root, "process " + std::to_string(::getpid()), "test_train_parts"});
}

TEST(Checkpointer, TakingTheSaveFolderRemovesTheTemporariesOfKilledSaves) {
  TempDir dir("checkpointer");
  const std::string root = dir / "ckpt";
  fs::create_directories(fs::path(root) / "iter_0000009.tmp.12345" / "mp_rank_00");
  std::ostringstream out;
  const auto lock = take_save_folder(root, out);
  EXPECT_FALSE(fs::exists(fs::path(root) / "iter_0000009.tmp.12345"));
  expect_contains(out.str(), {"removed 1 temporary", "iter_0000009.tmp.12345"});
}

TEST(Checkpointer, LoadWithoutATrackerWarnsAndStartsFromRandom) {
  TempDir dir("checkpointer");
  const std::string root = dir / "empty";
  fs::create_directories(root);
  const model::ModelConfig config = testing::tiny_config();
  const parallel::ParameterInit gen(3);
  const model::GptModel model(config, pc(), gen);
  const parallel::PipelineLayout layout{config.num_layers, 1, 1, std::nullopt, std::nullopt};
  const tokenizer::TokenizerOptions tokenizer;
  const Checkpointer::LoadTarget target{model.named_parameters(), model.parameter_layouts(), layout, config, tokenizer, {}};

  std::ostringstream quiet;
  EXPECT_FALSE(Checkpointer(CheckpointPlan{}, pc(), false, quiet, nullptr).load(target).has_value());  // no --load
  EXPECT_EQ(quiet.str(), "");

  CheckpointPlan plan;
  plan.load = root;
  std::ostringstream out;
  EXPECT_FALSE(Checkpointer(plan, pc(), false, out, nullptr).load(target).has_value());
  expect_contains(out.str(), {"WARNING: could not find the metadata file " + root + "/latest_checkpointed_iteration.txt",
                              "\n    will not load any checkpoints and will start from random\n"});
}

TEST(Checkpointer, LoadRestoresTheSavedParametersAndCounters) {
  TempDir dir("checkpointer");
  const std::string root = dir / "ckpt";
  const model::ModelConfig config = testing::tiny_config();
  const parallel::ParameterInit gen1(1);
  const parallel::ParameterInit gen2(2);
  const model::GptModel saved(config, pc(), gen1);
  const model::GptModel fresh(config, pc(), gen2);
  {
    CheckpointPlan plan;
    plan.save = root;
    std::ostringstream out;
    Checkpointer(plan, pc(), false, out, take_save_folder(root, out)).save(state_at(6, config, saved.named_parameters()));
  }
  const auto& a = saved.named_parameters();
  const auto& b = fresh.named_parameters();
  ASSERT_EQ(a.size(), b.size());
  EXPECT_FALSE(at::equal(a[0].second, b[0].second)) << "another seed, other weights";

  CheckpointPlan plan;
  plan.load = root;
  std::ostringstream out;
  const parallel::PipelineLayout layout{config.num_layers, 1, 1, std::nullopt, std::nullopt};
  const auto state =
      Checkpointer(plan, pc(), false, out, nullptr).load({b, fresh.parameter_layouts(), layout, config, tokenizer::TokenizerOptions{}, {}});
  ASSERT_TRUE(state.has_value());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_TRUE(at::equal(a[i].second, b[i].second)) << a[i].first;
  }
  EXPECT_EQ(state->iteration, 6);
  EXPECT_EQ(state->consumed_train_samples, 48);
  EXPECT_EQ(state->consumed_valid_samples, 18);
  EXPECT_EQ(state->scheduler_num_steps, 48);
  EXPECT_EQ(state->optimizer_steps, 6);
  EXPECT_EQ(state->floating_point_operations_so_far, 1.5);
  ASSERT_EQ(state->optimizer.size(), 1u);
  EXPECT_TRUE(at::equal(state->optimizer[0].second, at::full({48}, 0.5f)));
  ASSERT_EQ(state->rng.size(), 1u);
  EXPECT_TRUE(at::equal(state->rng[0].second, at::arange(16, at::kByte)));
  expect_contains(out.str(), {" loading checkpoint from " + root + " at iteration 6\n"});
}

TEST(Checkpointer, RefusesACheckpointOfAnotherHiddenSizeListingTheDifference) {
  TempDir dir("checkpointer");
  const std::string root = dir / "ckpt";
  model::ModelConfig wide = testing::tiny_config();
  wide.hidden_size = 64;
  const parallel::ParameterInit gen(1);
  const model::GptModel other(wide, pc(), gen);
  {
    CheckpointPlan plan;
    plan.save = root;
    std::ostringstream out;
    Checkpointer(plan, pc(), false, out, take_save_folder(root, out)).save(state_at(2, wide, other.named_parameters()));
  }
  const model::ModelConfig config = testing::tiny_config();
  const parallel::ParameterInit gen2(2);
  const model::GptModel ours(config, pc(), gen2);
  std::vector<at::Tensor> before;
  for (const auto& [name, t] : ours.named_parameters()) before.push_back(t.clone());

  CheckpointPlan plan;
  plan.load = root;
  std::ostringstream out;
  const parallel::PipelineLayout layout{config.num_layers, 1, 1, std::nullopt, std::nullopt};
  const Checkpointer checkpointer(plan, pc(), false, out, nullptr);
  const std::string message = error_of(
      [&] { checkpointer.load({ours.named_parameters(), ours.parameter_layouts(), layout, config, tokenizer::TokenizerOptions{}, {}}); });
  expect_contains(message, {"was saved for a different model:", "\n  hidden_size: checkpoint 64, command line 48",
                            "iter_0000002"});
  EXPECT_EQ(count(message, "\n  "), 1u) << "only the hidden size differs: " << message;
  for (std::size_t i = 0; i < before.size(); ++i) {
    EXPECT_TRUE(at::equal(before[i], ours.named_parameters()[i].second)) << "nothing loaded";
  }
}

// A resume reads the checkpoint's token ids with this run's tokenizer: another one (another type,
// settings or files) is refused without --finetune, naming both; the same files elsewhere pass.
TEST(Checkpointer, ResumingWithAnotherTokenizerIsRefusedUnlessFinetuning) {
  TempDir dir("checkpointer");
  const std::string root = dir / "ckpt";
  const model::ModelConfig config = testing::tiny_config();
  const parallel::ParameterInit gen(1);
  const model::GptModel model(config, pc(), gen);
  tokenizer::TokenizerOptions gpt2;
  gpt2.vocab_file = megatron::testing::gpt2_vocab_file();
  gpt2.merge_file = megatron::testing::gpt2_merges_file();
  {
    CheckpointPlan plan;
    plan.save = root;
    std::ostringstream out;
    Checkpointer saver(plan, pc(), false, out, take_save_folder(root, out));  // with the tokenizer's copies
    checkpoint::CheckpointState state = state_at(4, config, model.named_parameters());
    state.config.update(gpt2.to_json());  // the run's arguments, as the trainer records them
    state.tokenizer_files = std::make_shared<const checkpoint::AssetFiles>(tokenizer::read_tokenizer_files(gpt2));
    saver.save(state);
  }
  const parallel::PipelineLayout layout{config.num_layers, 1, 1, std::nullopt, std::nullopt};
  const auto load = [&](const tokenizer::TokenizerOptions& tokenizer, bool finetune, std::ostringstream& out) {
    CheckpointPlan plan;
    plan.load = root;
    plan.finetune = finetune;
    return Checkpointer(plan, pc(), false, out, nullptr)
        .load({model.named_parameters(), model.parameter_layouts(), layout, config, tokenizer, {}});
  };
  std::ostringstream out;
  tokenizer::TokenizerOptions null;
  null.type = tokenizer::TokenizerType::kNull;
  null.vocab_size = 50257;
  expect_contains(error_of([&] { load(null, false, out); }),
                  {"was trained with --vocab-file " + gpt2.vocab_file, "this run gives --tokenizer-type NullTokenizer",
                   "another tokenizer", "Give the tokenizer it was trained with, or --finetune"});
  // Other files: compared with the checkpoint's copies.
  tokenizer::TokenizerOptions other = gpt2;
  other.vocab_file = dir / "vocab.json";
  fs::copy_file(gpt2.vocab_file, other.vocab_file);
  std::ofstream(other.vocab_file, std::ios::app) << " ";  // one more byte
  expect_contains(error_of([&] { load(other, false, out); }), {"files that differ from the checkpoint's copies"});
  std::ostringstream warned;
  EXPECT_TRUE(load(other, true, warned).has_value());
  expect_contains(warned.str(), {"WARNING: checkpoint", "fine-tuning with it (--finetune)"});
  // The same files moved elsewhere are the same tokenizer.
  fs::remove(other.vocab_file);
  fs::copy_file(gpt2.vocab_file, other.vocab_file);
  std::ostringstream quiet;
  EXPECT_TRUE(load(other, false, quiet).has_value());
  EXPECT_EQ(quiet.str().find("WARNING"), std::string::npos) << quiet.str();
}

}  // namespace
}  // namespace megatron::train
