// The tokenizer of a loaded checkpoint (saved_run_tokenizer, what generate and the export use):
// the recorded one by default; another one only of the recorded one's size, or, when the recorded
// files are gone, one that Megatron's padding takes to the model's rows; never one with more
// tokens than the model has rows. Refusals name the tokenizer the checkpoint recorded.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "megatron/core/check.h"
#include "megatron/core/file_io.h"
#include "megatron/interop/loaded_model.h"
#include "test_support.h"

namespace megatron::interop {
namespace {

namespace fs = std::filesystem;

// A GPT-2 vocabulary of 1001 tokens (GPT-2's ids 0..999 and <|endoftext|> as 1000), no merges.
void write_small_tokenizer(const fs::path& vocab, const fs::path& merges) {
  const nlohmann::json gpt2 = nlohmann::json::parse(read_text_file(testing::gpt2_vocab_file(), "vocab"));
  nlohmann::json small = nlohmann::json::object();
  for (const auto& [token, id] : gpt2.items()) {
    if (id.get<int>() < 1000) small[token] = id;
  }
  small["<|endoftext|>"] = 1000;
  std::ofstream(vocab) << small.dump();
  std::ofstream(merges) << "#version: 0.2\n";
}

// What load_model gives for a megatron_train run with the GPT-2 tokenizer at TP 1 (50257 tokens
// padded to 50304 rows); only the run configuration and the vocabulary rows are read here.
LoadedModel trained_with(const std::string& vocab, const std::string& merges) {
  LoadedModel loaded;
  loaded.run = checkpoint::SavedRun::from_json(
      {{"tokenizer_type", "GPT2BPETokenizer"}, {"vocab_file", vocab}, {"merge_file", merges},
       {"make_vocab_size_divisible_by", 128}, {"tensor_model_parallel_size", 1}, {"padded_vocab_size", nullptr}},
      "iter_0000010");
  loaded.config.padded_vocab_size = 50304;
  return loaded;
}

TEST(SavedRunTokenizer, IsTheRecordedOneByDefault) {
  const LoadedModel loaded = trained_with(testing::gpt2_vocab_file(), testing::gpt2_merges_file());
  const RunTokenizer chosen = saved_run_tokenizer(loaded);
  EXPECT_EQ(chosen.tokenizer->vocab_size(), 50257u);
  EXPECT_EQ(chosen.options.vocab_file, testing::gpt2_vocab_file());
  EXPECT_EQ(chosen.options.merge_file, testing::gpt2_merges_file());
}

TEST(SavedRunTokenizer, TakesACopyOfTheRecordedOne) {
  testing::TempDir dir("tok");
  fs::copy_file(testing::gpt2_vocab_file(), dir / "vocab.json");
  fs::copy_file(testing::gpt2_merges_file(), dir / "merges.txt");
  const LoadedModel loaded = trained_with(testing::gpt2_vocab_file(), testing::gpt2_merges_file());
  std::string vocab = dir / "vocab.json", merges = dir / "merges.txt";
  EXPECT_EQ(saved_run_tokenizer(loaded, {vocab, merges, ""}).tokenizer->vocab_size(), 50257u);
}

TEST(SavedRunTokenizer, RefusesASmallerTokenizerNamingTheRecordedOne) {
  testing::TempDir dir("tok");
  write_small_tokenizer(dir / "small.json", dir / "small.txt");
  const LoadedModel loaded = trained_with(testing::gpt2_vocab_file(), testing::gpt2_merges_file());
  std::string vocab = dir / "small.json", merges = dir / "small.txt";
  testing::expect_contains(testing::error_of([&] { saved_run_tokenizer(loaded, {vocab, merges, ""}); }),
                           {"has 1001 tokens", "trained with --vocab-file " + testing::gpt2_vocab_file(),
                            "--merge-file " + testing::gpt2_merges_file(), "(50257 tokens)",
                            "leave --vocab-file and --merge-file out"});
}

TEST(SavedRunTokenizer, RefusesASmallerTokenizerWhenTheRecordedFilesAreGone) {
  testing::TempDir dir("tok");
  write_small_tokenizer(dir / "small.json", dir / "small.txt");
  const std::string gone = dir / "moved/gpt2-vocab.json";
  const LoadedModel loaded = trained_with(gone, dir / "moved/gpt2-merges.txt");
  std::string vocab = dir / "small.json", merges = dir / "small.txt";
  // 1001 tokens pad to 1024 rows at --make-vocab-size-divisible-by 128, not the model's 50304.
  testing::expect_contains(testing::error_of([&] { saved_run_tokenizer(loaded, {vocab, merges, ""}); }),
                           {"has 1001 tokens, padded to 1024 rows", "50304", "trained with --vocab-file " + gone});
}

TEST(SavedRunTokenizer, RefusesMoreTokensThanTheModelHasRows) {
  testing::TempDir dir("tok");
  write_small_tokenizer(dir / "small.json", dir / "small.txt");
  LoadedModel loaded = trained_with(dir / "small.json", dir / "small.txt");
  loaded.config.padded_vocab_size = 1024;
  std::string vocab = testing::gpt2_vocab_file(), merges = testing::gpt2_merges_file();
  testing::expect_contains(testing::error_of([&] { saved_run_tokenizer(loaded, {vocab, merges, ""}); }),
                           {"has 50257 tokens but the model's vocabulary has 1024 rows",
                            "trained with --vocab-file " + dir / "small.json"});
}

TEST(SavedRunTokenizer, ReadsTheCheckpointsCopyWhenTheRecordedFilesAreGone) {
  testing::TempDir dir("tok");
  const fs::path copies = dir / "ckpt/iter_0000020/tokenizer";
  fs::create_directories(copies);
  fs::copy_file(testing::gpt2_vocab_file(), copies / "vocab.json");
  fs::copy_file(testing::gpt2_merges_file(), copies / "merges.txt");
  LoadedModel loaded = trained_with(dir / "moved/vocab.json", dir / "moved/merges.txt");
  loaded.root = dir / "ckpt";
  loaded.iteration = 20;
  const RunTokenizer chosen = saved_run_tokenizer(loaded);
  EXPECT_EQ(chosen.tokenizer->vocab_size(), 50257u);
  EXPECT_EQ(fs::path(chosen.options.vocab_file), copies / "vocab.json");
  EXPECT_EQ(fs::path(chosen.options.merge_file), copies / "merges.txt");
  testing::expect_contains(chosen.source, {"the checkpoint's copy"});
  // Without the copies nothing names a file that is there: the error names both places.
  fs::remove_all(copies);
  testing::expect_contains(testing::error_of([&] { saved_run_tokenizer(loaded); }), {"moved/vocab.json"});
}

TEST(SavedRunTokenizer, ABrokenCopyIsBlamedOnTheCheckpointNotOnAFlag) {
  testing::TempDir dir("tok");
  const fs::path copies = dir / "ckpt/iter_0000010/tokenizer";
  fs::create_directories(copies);
  std::ofstream(copies / "tokenizer.json") << "{\"model\": ";  // cut short
  LoadedModel loaded;
  loaded.run = checkpoint::SavedRun::from_json(
      {{"tokenizer_type", "HuggingFaceTokenizer"}, {"tokenizer_model", dir / "gone"}}, "iter_0000010");
  loaded.config.padded_vocab_size = 128;
  loaded.root = dir / "ckpt";
  loaded.iteration = 10;
  const std::string error = testing::error_of([&] { saved_run_tokenizer(loaded); });
  testing::expect_contains(error, {"the checkpoint's copy of its tokenizer", "cannot be built", "is not valid JSON",
                                   "give --tokenizer-model to use the tokenizer it was trained with"});
  EXPECT_EQ(error.find("(--tokenizer-model)"), std::string::npos) << error;
}

TEST(SavedRunTokenizer, RefusesFilesOfAnotherTokenizerType) {
  const LoadedModel loaded = trained_with(testing::gpt2_vocab_file(), testing::gpt2_merges_file());
  testing::expect_contains(testing::error_of([&] { saved_run_tokenizer(loaded, {"", "", "/some/tokenizer.model"}); }),
                           {"--tokenizer-model names a tokenizer file", "trained with --vocab-file",
                            "give --vocab-file and --merge-file instead"});
  LoadedModel hf;
  hf.run = checkpoint::SavedRun::from_json({{"tokenizer_type", "HuggingFaceTokenizer"}, {"tokenizer_model", "/gone/llama3"}},
                                           "iter_0000010");
  hf.config.padded_vocab_size = 128256;
  testing::expect_contains(
      testing::error_of([&] { saved_run_tokenizer(hf, {testing::gpt2_vocab_file(), testing::gpt2_merges_file(), ""}); }),
      {"name GPT-2 files", "--tokenizer-type HuggingFaceTokenizer --tokenizer-model /gone/llama3",
       "give --tokenizer-model instead"});
}

}  // namespace
}  // namespace megatron::interop
