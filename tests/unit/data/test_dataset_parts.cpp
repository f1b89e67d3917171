// The small parts of spec 4 on their own: --split and --data-path parsing, numpy's float sums,
// blending indices, per-sample outputs, requested sample counts, the data-parallel sampler and
// the builder's refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "megatron/data/data_sampler.h"
#include "megatron/data/dataset_builder.h"
#include "megatron/data/gpt_indices.h"
#include "test_support.h"

namespace megatron::data {
namespace {

using testing::error_of;
using testing::expect_contains;

TEST(Split, ParsesMegatronSplitStrings) {
  const SplitMatrix m = parse_split("949,50,1");
  ASSERT_TRUE(m[0] && m[1] && m[2]);
  EXPECT_EQ(m[0]->begin, 0.0);
  EXPECT_TRUE(m[0]->begin_is_int);
  EXPECT_EQ(m[0]->end, 0.949);
  EXPECT_EQ(m[1]->end, 0.949 + 0.05);
  EXPECT_EQ(split_index_range(*m[0], 1000).end, 949);
  EXPECT_EQ(split_index_range(*m[1], 1000).end, 999);
  EXPECT_EQ(split_index_range(*m[2], 1000).end, 1000);
  EXPECT_FALSE(parse_split("99,1,0")[2].has_value());
  EXPECT_FALSE(parse_split("1")[1].has_value());
  EXPECT_EQ(parse_split("949 50 1")[0]->end, 0.949);
  EXPECT_EQ(split_matrix_json(parse_split("99,1,0")).dumps(4),
            "[\n    [\n        0,\n        0.99\n    ],\n    [\n        0.99,\n        1.0\n"
            "    ],\n    null\n]");
}

TEST(Split, RoundsHalfToEvenAsPython) {
  EXPECT_EQ(split_index_range({0.5, 0.7, false}, 5).begin, 2);  // round(2.5) == 2
  EXPECT_EQ(split_index_range({0.7, 0.9, false}, 5).begin, 4);  // round(3.5) == 4
  EXPECT_EQ(split_index_range({0.1, 0.9, false}, 5).begin, 0);  // round(0.5) == 0
}

TEST(Split, RejectsBadSplitStrings) {
  expect_contains(error_of([] { parse_split("1,2,3,4"); }), {"--split \"1,2,3,4\"", "4 numbers"});
  expect_contains(error_of([] { parse_split("1.2.3"); }), {"'1.2.3' is not a number"});
  expect_contains(error_of([] { parse_split("0,0"); }), {"sum to zero"});
}

TEST(Split, NumpySumUsesPairwiseOrder) {
  // Left to right: ((1e16 + 1) + 1) == 1e16; numpy agrees for fewer than 8 values.
  const std::vector<double> small = {1e16, 1.0, 1.0};
  EXPECT_EQ(numpy_sum(small), 1e16);
  // From 8 values on numpy keeps 8 strided accumulators: the two 1s meet before 1e16.
  const std::vector<double> sixteen = {1e16, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(numpy_sum(sixteen), 1e16 + 2.0);
}

TEST(Blend, ParsesWeightsAndPrefixes) {
  const Blend weighted = parse_blend({"30", " a ", "70", "b"}, "--data-path");
  EXPECT_EQ(weighted.prefixes, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*weighted.weights, (std::vector<double>{30.0, 70.0}));
  const Blend plain = parse_blend({"a", "b"}, "--data-path");
  EXPECT_FALSE(plain.weights.has_value());
  EXPECT_EQ(parse_blend({"a"}, "--data-path").prefixes.size(), 1u);
  EXPECT_FALSE(parse_blend({"1_0", "a", "x", "b"}, "--data-path").weights.has_value());
  EXPECT_EQ(*parse_blend({"1_0", "a", "1e-1", "b"}, "--data-path").weights,
            (std::vector<double>{10.0, 0.1}));
  expect_contains(error_of([] {
                    parse_blend({"0", "a", "1", "b"}, "--data-path");
                  }),
                  {"--data-path", "weight '0' of dataset a", "positive"});
}

TEST(Blend, ParsesWeightsAsPythonFloat) {
  const Blend blend = parse_blend({" +1.5 ", "a", "1_000.5", "b", "2e1", "c"}, "--data-path");
  ASSERT_TRUE(blend.weights.has_value());
  EXPECT_EQ(*blend.weights, (std::vector<double>{1.5, 1000.5, 20.0}));
  EXPECT_EQ(blend.prefixes, (std::vector<std::string>{"a", "b", "c"}));
  // "1__0" is not a Python float: every element is a prefix.
  EXPECT_FALSE(parse_blend({"1__0", "a"}, "--data-path").weights.has_value());
}

TEST(Blending, PicksTheLargestErrorFirstIndexOnTies) {
  std::vector<std::int16_t> ids;
  std::vector<std::int64_t> samples;
  const std::vector<double> weights = {0.5, 0.3, 0.2};
  build_blending_indices(weights, 10, ids, samples);
  EXPECT_EQ(ids, (std::vector<std::int16_t>{0, 1, 2, 0, 1, 0, 2, 0, 1, 0}));
  EXPECT_EQ(samples, (std::vector<std::int64_t>{0, 0, 0, 1, 1, 2, 1, 3, 2, 4}));
  const std::vector<std::int64_t> sizes = {3, 1};
  build_exhaustive_blending_indices(sizes, ids, samples);
  EXPECT_EQ(ids, (std::vector<std::int16_t>{0, 1, 0, 0}));
  EXPECT_EQ(samples, (std::vector<std::int64_t>{0, 0, 1, 2}));
}

TEST(EpochPlan, SeparatesASmallFinalEpoch) {
  // T = 1001 tokens, S = 10: 100 samples per epoch.
  EXPECT_EQ(plan_epochs(1001, 100, 10, 1).num_epochs, 1);
  const EpochPlan joined = plan_epochs(1001, 190, 10, 1);
  EXPECT_EQ(joined.num_epochs, 2);
  EXPECT_FALSE(joined.separate_final_epoch);  // 90 from the last epoch >= int(0.8 * 100)
  const EpochPlan separated = plan_epochs(1001, 150, 10, 1);
  EXPECT_TRUE(separated.separate_final_epoch);
  EXPECT_EQ(separated.num_samples_sans_final_epoch, 100);
  EXPECT_EQ(plan_epochs(1001, std::nullopt, 10, 1).num_epochs, 1);
  expect_contains(error_of([] { plan_epochs(1, 5, 10, 1); }), {"holds 1 tokens"});
}

SampleOptions options(bool reset_positions, bool eod_mask) {
  SampleOptions o;
  o.eod = 9;
  o.pad = -1;
  o.reset_position_ids = reset_positions;
  o.eod_mask_loss = eod_mask;
  return o;
}

TEST(Sample, BuildsTokensLabelsMasksAndPositions) {
  const std::vector<std::int64_t> text = {5, 9, 6, 7, 9, 8, -1};
  std::vector<std::int64_t> tokens(6), labels(6), positions(6);
  std::vector<float> loss(6);
  std::vector<std::int32_t> starts;
  make_sample(text, options(true, true), {tokens, labels, loss, positions, &starts});
  EXPECT_EQ(tokens, (std::vector<std::int64_t>{5, 9, 6, 7, 9, 8}));
  EXPECT_EQ(labels, (std::vector<std::int64_t>{9, 6, 7, 9, 8, 0}));  // pad label -> 0
  EXPECT_EQ(loss, (std::vector<float>{1, 0, 1, 1, 0, 0}));           // EOD tokens, pad label
  EXPECT_EQ(positions, (std::vector<std::int64_t>{0, 1, 0, 1, 2, 0}));
  EXPECT_EQ(starts, (std::vector<std::int32_t>{2, 5}));
  make_sample(text, options(false, false), {tokens, labels, loss, positions, nullptr});
  EXPECT_EQ(positions, (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(loss, (std::vector<float>{1, 1, 1, 1, 1, 0}));
}

TEST(SampleCounts, FollowMegatronsFormula) {
  SampleCountArgs args;
  args.train_iters = 1000;
  args.global_batch_size = 8;
  args.eval_interval = 300;
  args.eval_iters = 5;
  const SplitSamples n = train_valid_test_num_samples(args);
  EXPECT_EQ(n[0], 8000);
  EXPECT_EQ(n[1], (1000 / 300 + 1) * 5 * 8);
  EXPECT_EQ(n[2], 40);
  args.train_samples = 12345;
  args.full_validation = true;
  const SplitSamples m = train_valid_test_num_samples(args);
  EXPECT_EQ(m[0], 12345);
  EXPECT_FALSE(m[1].has_value());
  EXPECT_EQ(format_target_sizes(m),
            " > datasets target sizes (minimum size):\n    train:      12345\n"
            "    validation: None\n    test:       40\n");
}

TEST(Sampler, SlicesStepBatchesByDataParallelRank) {
  PretrainingSampler rank1(23, 4, 2, 1, 3);  // step batches of 6 from sample 4
  std::vector<std::uint64_t> batch;
  ASSERT_TRUE(rank1.next(batch));
  EXPECT_EQ(batch, (std::vector<std::uint64_t>{6, 7}));
  ASSERT_TRUE(rank1.next(batch));
  EXPECT_EQ(batch, (std::vector<std::uint64_t>{12, 13}));
  ASSERT_TRUE(rank1.next(batch));
  EXPECT_EQ(batch, (std::vector<std::uint64_t>{18, 19}));
  EXPECT_FALSE(rank1.next(batch));  // 22..27 would pass the end: dropped
  EXPECT_EQ(rank1.consumed_samples(), 22u);
  expect_contains(error_of([] { PretrainingSampler(10, 10, 1, 0, 1); }), {"no samples left"});
  expect_contains(error_of([] { PretrainingSampler(10, 0, 1, 2, 2); }), {"rank 2"});
}

GptDatasetConfig golden_config() {
  GptDatasetConfig config;
  config.sequence_length = 64;
  config.tokenizer.vocab_size = 50257;
  config.tokenizer.eod = 50256;
  config.data_cache_path = "/nonexistent/never/written";
  return config;
}

TEST(Builder, RefusesConflictingFlags) {
  DataPaths paths;
  paths.data_path = {testing::golden_dataset_prefix()};
  paths.train_data_path = {testing::golden_dataset_prefix()};
  expect_contains(error_of([&] {
                    build_gpt_datasets(paths, {1, 1, 1}, golden_config());
                  }),
                  {"--data-path cannot be combined with --train-data-path"});
  paths.data_path.clear();
  paths.split = "1,1,1";
  expect_contains(error_of([&] {
                    build_gpt_datasets(paths, {1, 1, 1}, golden_config());
                  }),
                  {"--split \"1,1,1\" cannot be combined"});
  DataPaths mock;
  mock.mock_data = true;
  mock.data_path = {testing::golden_dataset_prefix()};
  expect_contains(error_of([&] {
                    build_gpt_datasets(mock, {1, 1, 1}, golden_config());
                  }),
                  {"--mock-data cannot be combined"});
}

TEST(Builder, WeightsNeedASampleCount) {
  DataPaths paths;
  paths.data_path = {"1", testing::golden_dataset_prefix(), "2", testing::golden_dataset_prefix()};
  GptDatasetConfig config = golden_config();
  testing::TempDir dir;
  config.data_cache_path = dir / "cache";
  expect_contains(error_of([&] {
                    build_gpt_datasets(paths, {100, std::nullopt, 10}, config);
                  }),
                  {"--data-path gives weights", "valid split needs a sample count"});
}

TEST(Builder, RefusesABlendThatOversamplesADataset) {
  DataPaths paths;
  paths.data_path = {"1", testing::golden_dataset_prefix(), "3", testing::golden_dataset_prefix()};
  paths.split = "98,1,1";
  GptDatasetConfig config = golden_config();
  testing::TempDir dir;
  config.data_cache_path = dir / "cache";
  config.mid_level_dataset_surplus = -0.5;  // build half of what the blend takes
  expect_contains(error_of([&] {
                    build_gpt_datasets(paths, {100000, 10, 10}, config);
                  }),
                  {"train blend oversamples its datasets", "raise --mid-level-dataset-surplus"});
}

// Indices too large to build are refused from their computed size, naming
// the flag, the bytes needed and the bytes available, before anything is allocated or written.
TEST(Builder, RefusesIndicesTooLargeToBuildBeforeWritingAnything) {
  DataPaths paths;
  paths.data_path = {testing::golden_dataset_prefix()};
  paths.split = "98,1,1";
  GptDatasetConfig config = golden_config();
  testing::TempDir dir;
  config.data_cache_path = dir / "cache";
  const std::int64_t huge = 1'000'000'000'000'000;  // samples: petabytes of indices
  const std::string train = error_of([&] { build_gpt_datasets(paths, {huge, 10, 10}, config); });
  expect_contains(train, {"building the dataset indices needs ", " bytes (", "of memory",
                          "the train split of dataset " + testing::golden_dataset_prefix(),
                          "set by --train-iters / --train-samples", " are available",
                          "lower --train-iters / --train-samples"});
  EXPECT_FALSE(std::filesystem::exists(dir / "cache")) << "something was written";
  const std::string valid = error_of([&] { build_gpt_datasets(paths, {10, huge, 10}, config); });
  expect_contains(valid, {"the valid split of dataset", "--eval-iters / --eval-interval"});
  // Sample counts whose token count overflows 64 bits are measured, not wrapped around.
  const std::int64_t most = std::numeric_limits<std::int64_t>::max();
  expect_contains(error_of([&] { build_gpt_datasets(paths, {10, 10, most}, config); }),
                  {"the test split of dataset", "--eval-iters"});
  EXPECT_FALSE(std::filesystem::exists(dir / "cache"));
}

TEST(Builder, SmallIndicesPassTheBudgetCheck) {
  DataPaths paths;
  paths.data_path = {testing::golden_dataset_prefix()};
  paths.split = "98,1,1";
  GptDatasetConfig config = golden_config();
  testing::TempDir dir;
  config.data_cache_path = dir / "cache";
  const GptDatasets built = build_gpt_datasets(paths, {1000, 10, 10}, config);
  ASSERT_NE(built.train(), nullptr);
  EXPECT_GE(built.train()->size(), 1000u);
}

// An empty split names itself, the dataset and the --split that emptied it.
TEST(Builder, AnEmptySplitNamesTheSplitAndTheDataset) {
  DataPaths paths;
  paths.data_path = {testing::golden_dataset_prefix()};
  paths.split = "99999,1,0";  // the valid share rounds to no sequence
  GptDatasetConfig config = golden_config();
  testing::TempDir dir;
  config.data_cache_path = dir / "cache";
  expect_contains(error_of([&] { build_gpt_datasets(paths, {10, 10, std::nullopt}, config); }),
                  {"the valid split of dataset " + testing::golden_dataset_prefix() +
                       " holds 0 tokens",
                   "--split \"99999,1,0\" gives it sequences [", "larger share in --split",
                   "--eval-iters 0"});
}

// The same split with nothing drawn from it (--eval-iters 0) has no dataset and no error (Megatron
// would loop forever counting epochs of 0 tokens); the train split is built as always.
TEST(Builder, AnEmptySplitWithNoSamplesHasNoDataset) {
  DataPaths paths;
  paths.data_path = {testing::golden_dataset_prefix()};
  paths.split = "99999,1,0";
  GptDatasetConfig config = golden_config();
  testing::TempDir dir;
  config.data_cache_path = dir / "cache";
  const GptDatasets built = build_gpt_datasets(paths, {10, 0, std::nullopt}, config);
  ASSERT_NE(built.train(), nullptr);
  EXPECT_GE(built.train()->size(), 10u);
  EXPECT_EQ(built.valid(), nullptr);
}

TEST(Builder, WarnsWhenSplitLeavesARequestedSplitEmpty) {
  DataPaths paths;
  paths.data_path = {testing::golden_dataset_prefix()};
  paths.split = "100,0,0";
  GptDatasetConfig config = golden_config();
  testing::TempDir dir;
  config.data_cache_path = dir / "cache";
  std::vector<std::string> warnings;
  config.warning = [&](const std::string& line) { warnings.push_back(line); };
  const GptDatasets built = build_gpt_datasets(paths, {10, 10, 10}, config);
  EXPECT_EQ(built.valid(), nullptr);
  ASSERT_EQ(warnings.size(), 1u);  // an empty test split is common and stays quiet
  expect_contains(warnings[0], {"--split \"100,0,0\" leaves the valid split of dataset " +
                                    testing::golden_dataset_prefix() + " empty",
                                "no validation runs", "--eval-iters / --eval-interval"});
  warnings.clear();
  build_gpt_datasets(paths, {10, 0, 10}, config);  // --eval-iters 0: nothing to say
  EXPECT_TRUE(warnings.empty());
}

}  // namespace
}  // namespace megatron::data
