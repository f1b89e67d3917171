// Checkpoint layout, round trip, commit order and the refusal of corrupt or partial checkpoints.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "megatron/checkpoint/async_saver.h"
#include "megatron/checkpoint/checkpoint.h"
#include "megatron/checkpoint/saved_run.h"
#include "megatron/checkpoint/reshard.h"
#include "megatron/parallel/communicator.h"
#include "megatron/core/check.h"
#include "test_support.h"

namespace megatron::checkpoint {
namespace {

namespace fs = std::filesystem;
using megatron::testing::error_of;
using megatron::testing::expect_contains;
using testing::TempDir;

CheckpointState sample_state(std::int64_t iteration) {
  CheckpointState s;
  s.iteration = iteration;
  s.consumed_train_samples = iteration * 16;
  s.scheduler_num_steps = iteration * 16;
  s.optimizer_steps = iteration;
  s.floating_point_operations_so_far = 1.5e12;
  s.config = {{"num_layers", 2}, {"hidden_size", 64}};
  s.model = {{"embedding.word_embeddings.weight", at::arange(12, at::kFloat).view({3, 4}) * iteration},
             {"decoder.final_layernorm.bias", at::full({4}, 0.5f)}};
  s.optimizer = {{"embedding.word_embeddings.weight.exp_avg", at::ones({3, 4})}};
  s.rng = {{"default", at::arange(10, at::kByte)}};
  return s;
}

std::string expect_load_error(const std::string& root, std::int64_t it) {
  try {
    load_checkpoint(root, it, "mp_rank_00", true, true);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected the load to fail";
  return "";
}

TEST(Checkpoint, UsesMegatronLayoutAndRoundTrips) {
  TempDir dir("ckpt");
  const std::string root = (dir.path() / "run").string();
  save_checkpoint(root, sample_state(100), "mp_rank_00");
  EXPECT_TRUE(fs::is_directory(dir.path() / "run/iter_0000100/mp_rank_00"));
  EXPECT_EQ(testing::read_file_bytes((dir.path() / "run/latest_checkpointed_iteration.txt").string()), "100");
  ASSERT_EQ(read_tracker(root), 100);
  const auto loaded = load_checkpoint(root, 100, "mp_rank_00", true, true);
  EXPECT_EQ(loaded.consumed_train_samples, 1600);
  EXPECT_EQ(loaded.optimizer_steps, 100);
  EXPECT_EQ(loaded.config, sample_state(100).config);
  ASSERT_EQ(loaded.model.size(), 2u);
  EXPECT_EQ(loaded.model[0].first, "embedding.word_embeddings.weight");
  EXPECT_TRUE(at::equal(loaded.model[0].second, sample_state(100).model[0].second));
  EXPECT_TRUE(at::equal(loaded.rng[0].second, at::arange(10, at::kByte)));
  // Nothing but the final names remains.
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(root)) entries.push_back(e.path().filename().string());
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::string>{"iter_0000100", "latest_checkpointed_iteration.txt"}));
}

TEST(Checkpoint, TrackerFollowsTheNewestSave) {
  TempDir dir("ckpt");
  const std::string root = dir.path().string();
  EXPECT_EQ(read_tracker(root), std::nullopt);
  save_checkpoint(root, sample_state(10), "mp_rank_00");
  save_checkpoint(root, sample_state(20), "mp_rank_00");
  EXPECT_EQ(read_tracker(root), 20);
  EXPECT_TRUE(fs::exists(iteration_folder(root, 10)));
}

TEST(Checkpoint, ASaveOfTheSameIterationReplacesTheFolderWhole) {
  TempDir dir("ckpt");
  const std::string root = dir.path().string();
  save_checkpoint(root, sample_state(10), "mp_rank_00");
  CheckpointState again = sample_state(10);
  again.model[0].second = again.model[0].second + 1;
  save_checkpoint(root, again, "mp_rank_00");  // swapped in with the old folder, which is then removed
  const auto loaded = load_checkpoint(root, 10, "mp_rank_00", true, true);
  EXPECT_TRUE(at::equal(loaded.model[0].second, again.model[0].second));
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(root)) entries.push_back(e.path().filename().string());
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::string>{"iter_0000010", "latest_checkpointed_iteration.txt"}));
}

TEST(Checkpoint, LeftoverTemporaryFolderDoesNotHideThePreviousCheckpoint) {
  TempDir dir("ckpt");
  const std::string root = dir.path().string();
  save_checkpoint(root, sample_state(10), "mp_rank_00");
  fs::create_directories(fs::path(iteration_folder(root, 20) + ".tmp.99999") / "mp_rank_00");  // a crash mid-save
  EXPECT_EQ(read_tracker(root), 10);
  EXPECT_NO_THROW(load_checkpoint(root, 10, "mp_rank_00", true, true));
}

TEST(Checkpoint, RefusesACorruptFile) {
  TempDir dir("ckpt");
  const std::string root = dir.path().string();
  save_checkpoint(root, sample_state(5), "mp_rank_00");
  const std::string model = iteration_folder(root, 5) + "/mp_rank_00/model.safetensors";
  {
    std::fstream f(model, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  const std::string msg = expect_load_error(root, 5);
  EXPECT_NE(msg.find("CRC-32"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
}

TEST(Checkpoint, RefusesATruncatedOrPartialCheckpoint) {
  TempDir dir("ckpt");
  const std::string root = dir.path().string();
  save_checkpoint(root, sample_state(5), "mp_rank_00");
  const std::string shard = iteration_folder(root, 5) + "/mp_rank_00";
  fs::resize_file(shard + "/optimizer.safetensors", 20);
  EXPECT_NE(expect_load_error(root, 5).find("truncated"), std::string::npos);
  fs::remove(shard + "/meta.json");
  EXPECT_NE(expect_load_error(root, 5).find("partial"), std::string::npos);
}

TEST(Checkpoint, TrackerNamingAMissingFolderSaysSo) {
  TempDir dir("ckpt");
  const std::string root = dir.path().string();
  save_checkpoint(root, sample_state(5), "mp_rank_00");
  fs::remove_all(iteration_folder(root, 5));
  const std::string msg = expect_load_error(root, 5);
  EXPECT_NE(msg.find("names iteration 5 but iter_0000005/ does not exist"), std::string::npos) << msg;
  EXPECT_NE(msg.find("latest_checkpointed_iteration.txt"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("partial"), std::string::npos) << msg;
}

TEST(Checkpoint, StartRemovesTheTemporariesOfDeadSavesOnly) {
  TempDir dir("ckpt");
  const std::string root = dir.path().string();
  save_checkpoint(root, sample_state(10), "mp_rank_00");
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  const std::string dead = std::to_string(child);
  const std::string live = std::to_string(::getppid());
  fs::create_directories(fs::path(iteration_folder(root, 20) + ".tmp." + dead) / "mp_rank_00");  // a SIGKILL mid-save
  dir.write("iter_0000020.tmp." + dead + "/mp_rank_00/model.safetensors", "partial");
  dir.write(std::string(kTrackerFile) + ".tmp." + dead + ".3", "20");
  fs::create_directories(iteration_folder(root, 30) + ".tmp." + live);  // a live writer: kept
  dir.write("notes.tmp." + dead + ".0", "not ours");                    // not a checkpoint name: kept
  const auto removed = remove_stale_temporaries(root);
  EXPECT_EQ(removed.size(), 2u);
  EXPECT_FALSE(fs::exists(iteration_folder(root, 20) + ".tmp." + dead));
  EXPECT_TRUE(fs::exists(iteration_folder(root, 30) + ".tmp." + live));
  EXPECT_TRUE(fs::exists(dir.path() / ("notes.tmp." + dead + ".0")));
  EXPECT_NO_THROW(load_checkpoint(root, 10, "mp_rank_00", true, true));
}

// With the save lock held, a temporary whose pid is alive here is still stale: the pid came from
// another node (a requeued job's rank 0 lands anywhere) and the lock keeps every other saver out.
TEST(Checkpoint, WithTheLockHeldEveryTemporaryIsStale) {
  TempDir dir("ckpt");
  const std::string root = dir.path().string();
  const auto lock = lock_save_folder(root);
  ASSERT_TRUE(lock->note().empty()) << "this file system cannot lock: " << lock->note();
  const std::string live = std::to_string(::getppid());
  fs::create_directories(fs::path(iteration_folder(root, 30) + ".tmp." + live) / "mp_rank_00");
  dir.write("notes.tmp." + live + ".0", "not ours");
  const auto removed = remove_stale_temporaries(root, true);
  EXPECT_EQ(removed.size(), 1u);
  EXPECT_FALSE(fs::exists(iteration_folder(root, 30) + ".tmp." + live));
  EXPECT_TRUE(fs::exists(dir.path() / ("notes.tmp." + live + ".0")));
}

TEST(Checkpoint, SecondRunSavingToTheSameFolderIsRefused) {
  TempDir dir("ckpt");
  const std::string root = (dir.path() / "run").string();
  const auto lock = lock_save_folder(root);
  EXPECT_TRUE(fs::exists(fs::path(root) / ".lock"));
  try {
    lock_save_folder(root);
    ADD_FAILURE() << "expected the second lock to fail";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("--save " + root), std::string::npos) << msg;
    EXPECT_NE(msg.find("process " + std::to_string(::getpid())), std::string::npos) << msg;
  }
}

TEST(Checkpoint, NoSaveOptimThenLoadingOptimizerStateIsAnError) {
  TempDir dir("ckpt");
  auto state = sample_state(7);
  state.optimizer.clear();
  save_checkpoint(dir.path().string(), state, "mp_rank_00");
  const std::string msg = expect_load_error(dir.path().string(), 7);
  EXPECT_NE(msg.find("--no-load-optim"), std::string::npos) << msg;
  EXPECT_NO_THROW(load_checkpoint(dir.path().string(), 7, "mp_rank_00", false, true));
}

TEST(Checkpoint, MalformedTrackerIsAnError) {
  TempDir dir("ckpt");
  dir.write("latest_checkpointed_iteration.txt", "12x");
  EXPECT_THROW(read_tracker(dir.path().string()), Error);
  dir.write("latest_checkpointed_iteration.txt", "release");
  EXPECT_THROW(read_tracker(dir.path().string()), Error);
}

struct SingleProcess {
  std::unique_ptr<parallel::Communicator> comm = parallel::make_single_process_communicator();
  parallel::ParallelState ps{parallel::ParallelConfig{}, 0};
  parallel::ParallelContext pc = parallel::ParallelContext::create(ps, *comm);
};

// --async-save: the call returns with a snapshot taken; changing the live tensors afterwards does
// not reach the checkpoint; the tracker moves only at the poll that commits, and the next save
// reuses the snapshot's buffers.
TEST(AsyncCheckpointSaver, CommitsAtThePollFromASnapshot) {
  TempDir dir("async");
  const std::string root = (dir.path() / "run").string();
  SingleProcess sp;
  AsyncCheckpointSaver saver(sp.pc);
  save_checkpoint(root, sample_state(1), "mp_rank_00");
  CheckpointState live = sample_state(2);
  const at::Tensor original = live.model[0].second.clone();
  EXPECT_FALSE(saver.start(root, live, ShardWriter{}).has_value());
  EXPECT_EQ(saver.in_flight(), 2);
  live.model[0].second.fill_(-1.0f);  // training goes on and changes the weights
  EXPECT_EQ(read_tracker(root), 1);   // written or not, nothing is committed before a poll
  std::optional<std::int64_t> committed;
  while (!(committed = saver.poll(false))) {
  }
  EXPECT_EQ(committed, 2);
  EXPECT_FALSE(saver.in_flight().has_value());
  EXPECT_EQ(read_tracker(root), 2);
  EXPECT_TRUE(at::equal(load_checkpoint(root, 2, "mp_rank_00", true, true).model[0].second, original));
  // The next start first commits the save in flight.
  EXPECT_FALSE(saver.start(root, sample_state(3), ShardWriter{}).has_value());
  EXPECT_EQ(saver.start(root, sample_state(4), ShardWriter{}), 3);
  EXPECT_EQ(saver.poll(true), 4);
  EXPECT_EQ(read_tracker(root), 4);
  EXPECT_TRUE(at::equal(load_checkpoint(root, 4, "mp_rank_00", true, true).model[0].second,
                        sample_state(4).model[0].second));
}

// A write that fails on the writer thread (here: the file-size limit, EFBIG) is reported by the
// poll, naming the file; the previous checkpoint and the tracker stay, and nothing is left over.
TEST(AsyncCheckpointSaver, AFailedWriteIsReportedAtThePoll) {
  TempDir dir("async");
  const std::string root = (dir.path() / "run").string();
  SingleProcess sp;
  save_checkpoint(root, sample_state(1), "mp_rank_00");
  CheckpointState big = sample_state(2);
  big.optimizer = {{"m", at::ones({1 << 20})}};  // 4 MiB
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 1 << 20;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string error;
  {
    AsyncCheckpointSaver saver(sp.pc);
    saver.start(root, big, ShardWriter{});
    try {
      saver.poll(true);
    } catch (const Error& e) {
      error = e.what();
    }
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(error.find("optimizer.safetensors"), std::string::npos) << error;
  EXPECT_EQ(read_tracker(root), 1);
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(root)) entries.push_back(e.path().filename().string());
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::string>{"iter_0000001", "latest_checkpointed_iteration.txt"}));
}

std::vector<std::string> iteration_folders(const std::string& root) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(root)) {
    if (e.is_directory()) out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Megatron's --save-retain-interval deletes the previous checkpoint unless its iteration is a
// multiple of the interval; --keep-last-checkpoints K keeps the newest K. Checked save by save.
TEST(Retention, KeepsTheNewestAndTheRetainedOnes) {
  TempDir dir("retain");
  const std::string root = (dir.path() / "run").string();
  const RetentionPolicy retain{4, std::nullopt};
  for (const std::int64_t it : {2, 4, 6, 8, 10}) {
    save_checkpoint(root, sample_state(it), "mp_rank_00");
    apply_retention(root, it, retain);
  }
  EXPECT_EQ(iteration_folders(root), (std::vector<std::string>{"iter_0000004", "iter_0000008", "iter_0000010"}));
  const auto removed = apply_retention(root, 10, RetentionPolicy{std::nullopt, 2});
  EXPECT_EQ(removed, (std::vector<std::string>{iteration_folder(root, 4)}));
  EXPECT_EQ(iteration_folders(root), (std::vector<std::string>{"iter_0000008", "iter_0000010"}));
  for (const std::int64_t it : {12, 14, 16}) {
    save_checkpoint(root, sample_state(it), "mp_rank_00");
    apply_retention(root, it, RetentionPolicy{8, 2});
  }
  EXPECT_EQ(iteration_folders(root), (std::vector<std::string>{"iter_0000008", "iter_0000014", "iter_0000016"}));
  EXPECT_EQ(read_tracker(root), 16);
  EXPECT_NO_THROW(load_checkpoint(root, 16, "mp_rank_00", true, true));
}

// A checkpoint that cannot be removed stays under its own name (a temporary name would be taken
// for a killed save's leftover at the next start), and the failure names it.
TEST(Retention, AFolderThatCannotBeRemovedKeepsItsName) {
  TempDir dir("retain");
  const std::string root = (dir.path() / "run").string();
  for (const std::int64_t it : {2, 4}) save_checkpoint(root, sample_state(it), "mp_rank_00");
  const auto refuse = [](const std::filesystem::path&, std::error_code& ec) {
    ec = std::make_error_code(std::errc::permission_denied);
  };
  const std::string message = error_of([&] { apply_retention(root, 4, RetentionPolicy{std::nullopt, 1}, refuse); });
  expect_contains(message, {"checkpoint retention: cannot remove " + iteration_folder(root, 2), "it stays"});
  EXPECT_EQ(iteration_folders(root), (std::vector<std::string>{"iter_0000002", "iter_0000004"}));
  EXPECT_TRUE(remove_stale_temporaries(root, true).empty());
}

// From iteration 10,000,000 on, Megatron's iter_%07d names have eight digits: still checkpoints.
TEST(Retention, CountsIterationsPastSevenDigits) {
  TempDir dir("retain");
  const std::string root = (dir.path() / "run").string();
  for (const std::int64_t it : {9999999, 10000000, 10000001}) save_checkpoint(root, sample_state(it), "mp_rank_00");
  apply_retention(root, 10000001, RetentionPolicy{std::nullopt, 2});
  EXPECT_EQ(iteration_folders(root), (std::vector<std::string>{"iter_10000000", "iter_10000001"}));
}

// The model a saved run configuration describes (the typed record's reader).
model::ModelConfig saved_model_config(const nlohmann::json& config, const std::string& where) {
  return SavedRun::from_json(config, where).model_config(where);
}

// A run configuration saved before it carried a "model" object: the saved arguments under
// Megatron's names give the same model.
TEST(SavedRun, ModelConfigComesFromTheModelObjectOrOlderSavedArguments) {
  const nlohmann::json legacy = {{"num_layers", 2}, {"hidden_size", 64}, {"ffn_hidden_size", 170},
                                 {"num_attention_heads", 4}, {"group_query_attention", false},
                                 {"num_query_groups", 1}, {"kv_channels", 16}, {"seq_length", 32},
                                 {"max_position_embeddings", 32}, {"position_embedding_type", "rope"},
                                 {"normalization", "RMSNorm"}, {"swiglu", true}, {"bias_swiglu_fusion", false},
                                 {"recompute_granularity", nullptr}, {"recompute_method", nullptr},
                                 {"padded_vocab_size_resolved", 128}, {"lr", 0.001}};
  const model::ModelConfig c = saved_model_config(legacy, "iter_0000010");
  EXPECT_EQ(c.num_query_groups, 4);  // one per head without group_query_attention
  EXPECT_EQ(c.padded_vocab_size, 128);
  EXPECT_EQ(c.ffn_hidden_size, 170);
  EXPECT_EQ(c.position_embedding, model::PositionEmbedding::kRope);
  EXPECT_FALSE(c.bias_activation_fusion);
  EXPECT_EQ(c.recompute_granularity, model::RecomputeGranularity::kNone);
  // The "model" object wins, whatever the arguments say.
  nlohmann::json current = legacy;
  model::ModelConfig other = c;
  other.hidden_size = 96;
  current["model"] = other.to_json();
  EXPECT_EQ(saved_model_config(current, "x").hidden_size, 96);
  expect_contains(error_of([] { saved_model_config(nlohmann::json{{"lr", 0.1}}, "iter_0000010"); }),
                  {"iter_0000010: the saved run configuration describes no model"});
  expect_contains(error_of([&] {
                    nlohmann::json bad = legacy;
                    bad["swiglu"] = "yes";
                    saved_model_config(bad, "iter_0000010");
                  }),
                  {"iter_0000010: model configuration: 'swiglu' is \"yes\""});
}

// The typed record: what the trainer and the importer write reads back whole, the arguments kept
// beside it; an older record's arguments give the same split, tokenizer and padding.
TEST(SavedRun, TypedRecordRoundTripsAndOlderArgumentsReadTheSame) {
  SavedRun run;
  model::ModelConfig m;
  m.num_layers = 8;
  m.hidden_size = 96;
  run.model = m;
  run.pipeline = {8, 2, std::nullopt, 3, std::nullopt};
  run.tokenizer.type = tokenizer::TokenizerType::kSentencePiece;
  run.tokenizer.tokenizer_model = "/data/tok.model";
  run.tokenizer.vocab_extra_ids = 3;
  run.vocab_padding = VocabPadding{64, 2};
  run.arguments = {{"lr", 0.5}};
  const SavedRun back = SavedRun::from_json(run.to_json(), "x");
  EXPECT_EQ(back.model_config("x").hidden_size, 96);
  EXPECT_EQ(back.pipeline.layout(2).chunks, 2);
  EXPECT_EQ(back.pipeline.first_stage_layers, 3);
  EXPECT_EQ(back.tokenizer.type, tokenizer::TokenizerType::kSentencePiece);
  EXPECT_EQ(back.tokenizer.vocab_extra_ids, 3);
  ASSERT_TRUE(back.vocab_padding.has_value());
  EXPECT_EQ(back.vocab_padding->divisible_by, 64);
  EXPECT_EQ(back.vocab_padding->tp, 2);
  EXPECT_EQ(back.arguments, (nlohmann::json{{"lr", 0.5}}));
  EXPECT_EQ(run.to_json().at("lr"), 0.5);  // the arguments stay at the top, under Megatron's names

  const nlohmann::json older = {{"num_layers", 8}, {"pipeline_model_parallel_size", 2},
                                {"num_layers_per_virtual_pipeline_stage", 2}, {"tokenizer_type", "SentencePieceTokenizer"},
                                {"tokenizer_model", "/data/tok.model"}, {"vocab_extra_ids", 3},
                                {"make_vocab_size_divisible_by", 64}, {"tensor_model_parallel_size", 2},
                                {"padded_vocab_size", nullptr}, {"model", m.to_json()}};
  const SavedRun legacy = SavedRun::from_json(older, "x");
  EXPECT_EQ(legacy.pipeline.layout(2).chunks, 2);  // 8 layers / 2 stages / 2 per chunk
  EXPECT_EQ(legacy.tokenizer.to_json(), back.tokenizer.to_json());
  ASSERT_TRUE(legacy.vocab_padding.has_value());
  EXPECT_EQ(legacy.vocab_padding->divisible_by, 64);
  nlohmann::json given = older;
  given["padded_vocab_size"] = 50304;  // --padded-vocab-size: no padding rule to check against
  EXPECT_FALSE(SavedRun::from_json(given, "x").vocab_padding.has_value());
  // A tokenizer type this build does not know: the model and the split still read (a resume needs
  // only them); what builds the tokenizer is told why it cannot.
  nlohmann::json unknown = older;
  unknown["tokenizer_type"] = "SFTTokenizer";
  const SavedRun sft = SavedRun::from_json(unknown, "x");
  EXPECT_EQ(sft.model_config("x").hidden_size, 96);
  EXPECT_NE(sft.tokenizer_problem.find("--tokenizer-type SFTTokenizer is a Megatron tokenizer this build does not "
                                       "implement yet"),
            std::string::npos);
  EXPECT_TRUE(back.tokenizer_problem.empty());
}

}  // namespace
}  // namespace megatron::checkpoint
