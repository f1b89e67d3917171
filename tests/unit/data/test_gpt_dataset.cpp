// GPT datasets built by build_gpt_datasets against the independent numpy implementation of
// spec 4 (gpt_dataset_reference.py): document / sample / shuffle indices, blending indices,
// descriptions and their MD5, sample texts and per-sample outputs, for single datasets (one
// epoch, separated and joined final epochs, partial validation samples), weighted and
// unweighted blends, per-split data paths and mock data. Then the cache's life cycle.
#include <gtest/gtest.h>

#include <filesystem>

#include "megatron/data/dataset_builder.h"
#include "reference_data.h"

namespace megatron::data {
namespace {

using nlohmann::ordered_json;
using testing::expect_contains;
using testing::ReferenceData;
using testing::TempDir;

GptDatasetConfig config_of(const ReferenceData& ref, const ordered_json& c,
                           const std::string& cache) {
  GptDatasetConfig config;
  config.random_seed = c["seed"].get<std::uint32_t>();
  config.sequence_length = c["seq_length"].get<std::int32_t>();
  config.tokenizer.vocab_size = ref.manifest()["vocab_size"].get<std::uint64_t>();
  config.tokenizer.eod = ref.manifest()["eod"].get<std::int64_t>();
  config.tokenizer.identifiers = testing::to_pyjson(ref.manifest()["tokenizer"]);
  config.data_cache_path = cache;
  config.reset_position_ids = c["flags"].value("reset_position_ids", false);
  config.eod_mask_loss = c["flags"].value("eod_mask_loss", false);
  config.drop_last_partial_validation_sequence = c["drop_last_valid"].get<bool>();
  return config;
}

DataPaths paths_of(const ordered_json& c) {
  DataPaths paths;
  const ordered_json& p = c["paths"];
  const auto list = [&](const char* key) {
    return p.contains(key) ? p[key].get<std::vector<std::string>>() : std::vector<std::string>{};
  };
  paths.data_path = list("data_path");
  paths.train_data_path = list("train_data_path");
  paths.valid_data_path = list("valid_data_path");
  paths.test_data_path = list("test_data_path");
  paths.mock_data = p.value("mock", false);
  if (p.contains("split")) paths.split = p["split"].get<std::string>();
  return paths;
}

SplitSamples samples_of(const ordered_json& c) {
  SplitSamples samples;
  for (std::size_t s = 0; s < 3; ++s) {
    if (!c["samples"][s].is_null()) samples[s] = c["samples"][s].get<std::int64_t>();
  }
  return samples;
}

const ordered_json& find_case(const ReferenceData& ref, const std::string& name) {
  for (const auto& c : ref.manifest()["cases"]) {
    if (c["name"] == name) return c;
  }
  throw std::runtime_error("no reference case " + name);
}

void expect_gpt(const GptDataset& ds, const ordered_json& e, const std::string& folder,
                const std::string& cache) {
  EXPECT_EQ(ds.class_name(), e["class_name"].get<std::string>());
  EXPECT_EQ(ds.description(),
            testing::read_file_bytes(folder + "/" + e["description"].get<std::string>()));
  EXPECT_EQ(ds.description_hash(), e["md5"].get<std::string>());
  testing::expect_same_array(ds.document_index(),
                             folder + "/" + e["document_index"].get<std::string>());
  testing::expect_same_array(ds.sample_index(),
                             folder + "/" + e["sample_index"].get<std::string>());
  testing::expect_same_array(ds.shuffle_index(),
                             folder + "/" + e["shuffle_index"].get<std::string>());
  const std::string base = cache + "/" + ds.description_hash() + "-" + ds.class_name() + "-" +
                           split_name(ds.split()) + "-";
  for (const char* affix :
       {"description.txt", "document_index.npy", "sample_index.npy", "shuffle_index.npy"}) {
    EXPECT_TRUE(std::filesystem::is_regular_file(base + affix)) << base + affix;
  }
}

void expect_blend(const BlendedDataset& ds, const ordered_json& e, const std::string& folder,
                  const std::string& cache) {
  EXPECT_EQ(ds.description(),
            testing::read_file_bytes(folder + "/" + e["description"].get<std::string>()));
  EXPECT_EQ(ds.description_hash(), e["md5"].get<std::string>());
  testing::expect_same_array(ds.dataset_index(),
                             folder + "/" + e["dataset_index"].get<std::string>());
  testing::expect_same_array(ds.dataset_sample_index(),
                             folder + "/" + e["dataset_sample_index"].get<std::string>());
  ASSERT_EQ(ds.datasets().size(), e["datasets"].size());
  for (std::size_t i = 0; i < ds.datasets().size(); ++i) {
    SCOPED_TRACE("mid-level dataset " + std::to_string(i));
    expect_gpt(*ds.datasets()[i], e["datasets"][i], folder, cache);
  }
  EXPECT_TRUE(std::filesystem::is_regular_file(
      cache + "/" + ds.description_hash() + "-BlendedDataset-" +
      split_name(ds.datasets()[0]->split()) + "-dataset_index.npy"));
}

template <typename T>
std::vector<T> row(const NpyArray& array, std::size_t r) {
  const std::size_t width = array.shape()[1];
  const auto values = array.values<T>();
  return {values.begin() + static_cast<std::ptrdiff_t>(r * width),
          values.begin() + static_cast<std::ptrdiff_t>((r + 1) * width)};
}

void expect_samples(const SampleDataset& ds, const ordered_json& e, const std::string& prefix) {
  const NpyArray texts = NpyArray::map(prefix + "-texts.npy");
  const NpyArray tokens = NpyArray::map(prefix + "-tokens.npy");
  const NpyArray labels = NpyArray::map(prefix + "-labels.npy");
  const NpyArray loss_mask = NpyArray::map(prefix + "-loss_mask.npy");
  const NpyArray position_ids = NpyArray::map(prefix + "-position_ids.npy");
  const std::size_t s = static_cast<std::size_t>(ds.sequence_length());
  std::vector<std::int64_t> text(s + 1), tok(s), lab(s), pos(s);
  std::vector<float> mask(s);
  std::size_t r = 0;
  for (const auto& k : e["sample_ks"]) {
    SCOPED_TRACE("item " + k.dump());
    ds.read_text(k.get<std::uint64_t>(), text);
    EXPECT_EQ(text, row<std::int64_t>(texts, r));
    ds.read_sample(k.get<std::uint64_t>(), {tok, lab, mask, pos});
    EXPECT_EQ(tok, row<std::int64_t>(tokens, r));
    EXPECT_EQ(lab, row<std::int64_t>(labels, r));
    EXPECT_EQ(mask, row<float>(loss_mask, r));
    EXPECT_EQ(pos, row<std::int64_t>(position_ids, r));
    ++r;
  }
}

class ReferenceCase : public ::testing::TestWithParam<const char*> {};

TEST_P(ReferenceCase, MatchesNumpyReference) {
  MEGATRON_REQUIRE_REFERENCE();
  const ordered_json& c = find_case(ref, GetParam());
  TempDir dir;
  const std::string cache = dir / "cache";
  const GptDatasets built =
      build_gpt_datasets(paths_of(c), samples_of(c), config_of(ref, c, cache));
  const std::string folder = ref.path(GetParam());
  for (std::size_t s = 0; s < 3; ++s) {
    SCOPED_TRACE(std::string("split ") + split_name(static_cast<Split>(s)));
    const ordered_json& e = c["splits"][s];
    if (e.is_null()) {
      EXPECT_EQ(built.splits[s], nullptr);
      continue;
    }
    ASSERT_NE(built.splits[s], nullptr);
    EXPECT_EQ(built.splits[s]->size(), e["size"].get<std::uint64_t>());
    if (e["kind"] == "gpt") {
      const auto* ds = dynamic_cast<const GptDataset*>(built.splits[s].get());
      ASSERT_NE(ds, nullptr);
      expect_gpt(*ds, e, folder, cache);
    } else {
      const auto* ds = dynamic_cast<const BlendedDataset*>(built.splits[s].get());
      ASSERT_NE(ds, nullptr);
      expect_blend(*ds, e, folder, cache);
    }
    expect_samples(*built.splits[s], e, folder + "/" + split_name(static_cast<Split>(s)));
  }
}

INSTANTIATE_TEST_SUITE_P(Spec4, ReferenceCase,
                         ::testing::Values("single_one_epoch", "single_separate_final_epoch",
                                           "single_two_epochs_joined", "single_default_split_seq64",
                                           "single_valid_partial", "single_seq8_one_epoch",
                                           "blend_weighted", "blend_unweighted",
                                           "blend_single_weighted", "per_split_paths", "mock"));

TEST(GptDataset, ReferenceCoversTheEpochRegimes) {
  MEGATRON_REQUIRE_REFERENCE();
  EXPECT_EQ(find_case(ref, "single_one_epoch")["splits"][0]["epochs"], 1);
  EXPECT_EQ(find_case(ref, "single_separate_final_epoch")["splits"][0]["epochs"], 3);
  EXPECT_EQ(find_case(ref, "single_separate_final_epoch")["splits"][0]["separate_final_epoch"],
            true);
  EXPECT_EQ(find_case(ref, "single_two_epochs_joined")["splits"][0]["epochs"], 2);
  EXPECT_EQ(find_case(ref, "single_two_epochs_joined")["splits"][0]["separate_final_epoch"], false);
}

TEST(GptDataset, MockLengthsAreNumpyDefaultRng) {
  MEGATRON_REQUIRE_REFERENCE();
  const MockTokenSource mock(50256, 50257);
  const NpyArray expected = NpyArray::map(ref.path("mock_lengths.npy"));
  const auto values = expected.values<std::int32_t>();
  ASSERT_EQ(mock.sequence_lengths().size(), values.size());
  EXPECT_TRUE(std::equal(values.begin(), values.end(), mock.sequence_lengths().begin()));
  std::vector<std::int64_t> tokens(4);
  const std::int64_t length = mock.sequence_lengths()[0];
  mock.read(0, length - 4, 4, tokens.data());
  EXPECT_EQ(tokens, (std::vector<std::int64_t>{length - 3, length - 2, length - 1, 50256}));
}

}  // namespace
}  // namespace megatron::data
