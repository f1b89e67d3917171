// The index cache's life cycle: built once and then only mapped, partial caches (a crash
// between renames) rebuilt, corrupt caches rebuilt with a warning or refused on load-only
// ranks, the default folder next to the data, and the vocabulary check with its cached range.
#include <gtest/gtest.h>

#include <filesystem>

#include "megatron/data/dataset_builder.h"
#include "megatron/data/index_cache.h"
#include "megatron/data/indexed_dataset.h"
#include "test_support.h"

namespace megatron::data {
namespace {

using testing::error_of;
using testing::expect_contains;
using testing::TempDir;

GptDatasetConfig small_config(const std::string& cache) {
  GptDatasetConfig config;
  config.sequence_length = 128;
  config.tokenizer.vocab_size = 50257;
  config.tokenizer.eod = 50256;
  config.data_cache_path = cache;
  return config;
}

DataPaths golden_paths() {
  DataPaths paths;
  paths.data_path = {testing::golden_dataset_prefix()};
  paths.split = "969, 30, 1";
  return paths;
}

const GptDataset& train_of(const GptDatasets& built) {
  return dynamic_cast<const GptDataset&>(*built.splits[0]);
}

// The index cache files in `folder` (not the token id range the vocabulary check keeps there).
std::vector<std::string> npy_files(const std::string& folder) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with("-token_id_range.json")) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(DatasetCache, SecondStartMapsTheCacheWithoutRebuilding) {
  TempDir dir;
  const std::string cache = dir / "cache";
  const SplitSamples samples = {5000, 100, 10};
  const GptDatasets first = build_gpt_datasets(golden_paths(), samples, small_config(cache));
  EXPECT_TRUE(train_of(first).built_anew());
  EXPECT_EQ(npy_files(cache).size(), 12u);  // 3 splits x (description + 3 arrays)
  std::map<std::string, std::filesystem::file_time_type> times;
  for (const std::string& name : npy_files(cache)) {
    times[name] = std::filesystem::last_write_time(cache + "/" + name);
  }

  std::vector<std::string> log;
  GptDatasetConfig config = small_config(cache);
  config.info = [&](const std::string& line) { log.push_back(line); };
  const GptDatasets second = build_gpt_datasets(golden_paths(), samples, config);
  const GptDataset& train = train_of(second);
  EXPECT_FALSE(train.built_anew());
  EXPECT_TRUE(train.document_index().mapped());
  EXPECT_TRUE(train.sample_index().mapped());
  EXPECT_TRUE(train.shuffle_index().mapped());
  for (const auto& [name, time] : times) {
    EXPECT_EQ(std::filesystem::last_write_time(cache + "/" + name), time) << name;
  }
  ASSERT_FALSE(log.empty());
  for (const std::string& line : log)
    EXPECT_EQ(line.find("Build and save"), std::string::npos) << line;
  std::vector<std::int64_t> a(129), b(129);
  for (const std::uint64_t k : std::vector<std::uint64_t>{0, 17, train.size() - 1}) {
    train_of(first).read_text(k, a);
    train.read_text(k, b);
    EXPECT_EQ(a, b);
  }
}

TEST(DatasetCache, ADifferentRequestGetsItsOwnFiles) {
  TempDir dir;
  const std::string cache = dir / "cache";
  build_gpt_datasets(golden_paths(), {5000, 100, 10}, small_config(cache));
  GptDatasetConfig other = small_config(cache);
  other.random_seed = 99;
  const GptDatasets built = build_gpt_datasets(golden_paths(), {5000, 100, 10}, other);
  EXPECT_TRUE(train_of(built).built_anew());
  EXPECT_EQ(npy_files(cache).size(), 24u);
}

TEST(DatasetCache, PartialCacheIsRebuilt) {
  TempDir dir;
  const std::string cache = dir / "cache";
  const GptDatasets first =
      build_gpt_datasets(golden_paths(), {5000, 100, 10}, small_config(cache));
  // A crash before the description's rename leaves the arrays without it: a cache miss.
  const std::string description =
      cache + "/" + train_of(first).description_hash() + "-GPTDataset-train-description.txt";
  ASSERT_TRUE(std::filesystem::remove(description));
  const GptDatasets second =
      build_gpt_datasets(golden_paths(), {5000, 100, 10}, small_config(cache));
  EXPECT_TRUE(train_of(second).built_anew());
  EXPECT_TRUE(std::filesystem::is_regular_file(description));
  EXPECT_FALSE(dynamic_cast<const GptDataset&>(*second.splits[1]).built_anew());
}

TEST(DatasetCache, CorruptCacheIsRebuiltWithAWarning) {
  TempDir dir;
  const std::string cache = dir / "cache";
  const GptDatasets first =
      build_gpt_datasets(golden_paths(), {5000, 100, 10}, small_config(cache));
  const std::string sample_index =
      cache + "/" + train_of(first).description_hash() + "-GPTDataset-train-sample_index.npy";
  std::filesystem::resize_file(sample_index, std::filesystem::file_size(sample_index) - 8);

  std::vector<std::string> warnings;
  GptDatasetConfig config = small_config(cache);
  config.warning = [&](const std::string& line) { warnings.push_back(line); };
  const GptDatasets second = build_gpt_datasets(golden_paths(), {5000, 100, 10}, config);
  EXPECT_TRUE(train_of(second).built_anew());
  ASSERT_EQ(warnings.size(), 1u);
  expect_contains(warnings[0], {"GPTDataset train indices", cache, "unusable", "sample_index.npy",
                                "truncated or corrupt", "rebuilding"});
  std::vector<std::int64_t> a(129), b(129);
  train_of(first).read_text(3, a);
  train_of(second).read_text(3, b);
  EXPECT_EQ(a, b);
  // Rewritten whole: a third start maps it again.
  EXPECT_FALSE(train_of(build_gpt_datasets(golden_paths(), {5000, 100, 10}, small_config(cache)))
                   .built_anew());
}

TEST(DatasetCache, LoadOnlyRanksRefuseMissingOrCorruptCaches) {
  TempDir dir;
  const std::string cache = dir / "cache";
  GptDatasetConfig load_only = small_config(cache);
  load_only.build_policy = IndexBuildPolicy::kLoadOnly;
  expect_contains(error_of([&] {
                    build_gpt_datasets(golden_paths(), {5000, 100, 10}, load_only);
                  }),
                  {"GPTDataset train indices", "are not in", cache, "rank 0 builds them",
                   "shared file system"});
  const GptDatasets built =
      build_gpt_datasets(golden_paths(), {5000, 100, 10}, small_config(cache));
  EXPECT_FALSE(
      train_of(build_gpt_datasets(golden_paths(), {5000, 100, 10}, load_only)).built_anew());
  const std::string shuffle =
      cache + "/" + train_of(built).description_hash() + "-GPTDataset-train-shuffle_index.npy";
  testing::TempDir scratch;
  std::filesystem::copy_file(scratch.write("x.npy", "garbage"), shuffle,
                             std::filesystem::copy_options::overwrite_existing);
  expect_contains(error_of([&] {
                    build_gpt_datasets(golden_paths(), {5000, 100, 10}, load_only);
                  }),
                  {"unusable", "not a .npy file", "delete them"});
}

TEST(DatasetCache, AMismatchedDescriptionIsNotLoaded) {
  TempDir dir;
  const std::string cache = dir / "cache";
  const GptDatasets first =
      build_gpt_datasets(golden_paths(), {5000, 100, 10}, small_config(cache));
  const std::string description =
      cache + "/" + train_of(first).description_hash() + "-GPTDataset-train-description.txt";
  TempDir scratch;
  std::filesystem::copy_file(scratch.write("d.txt", "{}"), description,
                             std::filesystem::copy_options::overwrite_existing);
  std::vector<std::string> warnings;
  GptDatasetConfig config = small_config(cache);
  config.warning = [&](const std::string& line) { warnings.push_back(line); };
  EXPECT_TRUE(train_of(build_gpt_datasets(golden_paths(), {5000, 100, 10}, config)).built_anew());
  ASSERT_EQ(warnings.size(), 1u);
  expect_contains(warnings[0], {"does not describe this dataset"});
}

// A writable copy of the golden dataset, for the caches that default to the data's folder.
std::string copy_golden(const TempDir& dir) {
  const std::string prefix = dir / "corpus";
  std::filesystem::copy_file(testing::golden_dataset_prefix() + ".bin", prefix + ".bin");
  std::filesystem::copy_file(testing::golden_dataset_prefix() + ".idx", prefix + ".idx");
  return prefix;
}

TEST(DatasetCache, DefaultFolderIsUnderThePrefix) {
  TempDir dir;
  DataPaths paths;
  paths.data_path = {copy_golden(dir)};
  std::vector<std::string> warnings;
  GptDatasetConfig config = small_config("");
  config.warning = [&](const std::string& line) { warnings.push_back(line); };
  const GptDatasets built = build_gpt_datasets(paths, {1000, 10, 10}, config);
  EXPECT_EQ(built.split, std::optional<std::string>(kDefaultSplit));
  ASSERT_EQ(warnings.size(), 1u);
  expect_contains(warnings[0], {"--split not given", "969, 30, 1"});
  const std::string folder = dir / "corpus/cache/GPTDataset_indices";
  EXPECT_EQ(train_of(built).cache_folder(), folder);
  EXPECT_TRUE(std::filesystem::is_regular_file(folder + "/" + train_of(built).description_hash() +
                                               "-GPTDataset-train-shuffle_index.npy"));
}

TEST(DatasetCache, DataRewrittenUnderTheSamePrefixRebuildsTheIndices) {
  // The cache is named by the description (path, split, seed, sizes), not the data: a dataset
  // regenerated under the same prefix must not be read through its predecessor's indices.
  TempDir dir;
  const std::string prefix = copy_golden(dir);
  DataPaths paths;
  paths.data_path = {prefix};
  paths.split = "90, 10, 0";
  const std::string cache = dir / "cache";
  EXPECT_TRUE(train_of(build_gpt_datasets(paths, {2000, 10, 10}, small_config(cache))).built_anew());
  {
    const IndexedDataset golden(testing::golden_dataset_prefix());
    std::filesystem::remove(prefix + ".bin");
    std::filesystem::remove(prefix + ".idx");
    IndexedDatasetWriter smaller(prefix, golden.dtype());
    for (std::size_t d = 0; d < 300; ++d) {
      const auto doc = golden.read_document(d);
      const std::vector<std::int32_t> tokens(doc.begin(), doc.end());
      const std::int32_t length = static_cast<std::int32_t>(tokens.size());
      smaller.add_document(tokens, length > 0 ? std::vector<std::int32_t>{length} : std::vector<std::int32_t>{});
    }
    smaller.finalize();
  }
  std::vector<std::string> warnings;
  GptDatasetConfig config = small_config(cache);
  config.warning = [&](const std::string& line) { warnings.push_back(line); };
  const GptDatasets second = build_gpt_datasets(paths, {2000, 10, 10}, config);
  EXPECT_TRUE(train_of(second).built_anew());
  ASSERT_FALSE(warnings.empty());
  expect_contains(warnings[0], {"built for other data", prefix, "rebuilding"});
  std::vector<std::int64_t> text(129);
  for (std::uint64_t k = 0; k < train_of(second).size(); k += 97) train_of(second).read_text(k, text);
}

TEST(DatasetCache, AtomicGroupSaveLeavesNoTemporaries) {
  TempDir dir;
  const IndexCache cache(dir / "c", "abc-GPTDataset-train", {"a", "b"});
  EXPECT_FALSE(cache.complete());
  cache.save("{}", {IndexArray::from_vector(std::vector<std::int32_t>{1, 2}),
                    IndexArray::from_vector(std::vector<std::uint32_t>{3})});
  EXPECT_TRUE(cache.complete());
  EXPECT_EQ(npy_files(dir / "c"),
            (std::vector<std::string>{"abc-GPTDataset-train-a.npy", "abc-GPTDataset-train-b.npy",
                                      "abc-GPTDataset-train-description.txt"}));
}

TEST(VocabCheck, RefusesTokenIdsOutsideTheVocabulary) {
  TempDir dir;
  GptDatasetConfig config = small_config(dir / "cache");
  config.tokenizer.vocab_size = 1000;
  const std::string message = error_of([&] {
    build_gpt_datasets(golden_paths(), {100, 10, 10}, config);
  });
  expect_contains(message, {"dataset " + testing::golden_dataset_prefix(), "holds token id 50256",
                            "vocabulary has only 1000 ids (0..999)", "--tokenizer-type"});
  EXPECT_TRUE(npy_files(dir / "cache").empty());  // refused before any index was built
}

TEST(VocabCheck, TheTokenIdRangeIsScannedOnceThenCached) {
  TempDir dir;
  const IndexedTokenSource first(testing::golden_dataset_prefix(), dir / "cache");
  const auto range = first.token_id_range();
  EXPECT_FALSE(first.range_from_cache());
  EXPECT_EQ(range.second, 50256);
  EXPECT_GE(range.first, 0);
  const IndexedTokenSource second(testing::golden_dataset_prefix(), dir / "cache");
  EXPECT_EQ(second.token_id_range(), range);
  EXPECT_TRUE(second.range_from_cache());
  EXPECT_NO_THROW(check_token_ids_fit_vocab(second, 50257));
  expect_contains(error_of([&] { check_token_ids_fit_vocab(second, 50256); }),
                  {"holds token id 50256", "only 50256 ids"});
}

TEST(VocabCheck, MockDataFitsAnyVocabulary) {
  const MockTokenSource mock(99, 100);
  EXPECT_NO_THROW(check_token_ids_fit_vocab(mock, 100));
  EXPECT_EQ(mock.token_id_range(), (std::pair<std::int64_t, std::int64_t>{0, 99}));
}

}  // namespace
}  // namespace megatron::data
