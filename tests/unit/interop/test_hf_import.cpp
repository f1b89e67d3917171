// Export then import: a model written as a HuggingFace folder (one safetensors file, or shards
// with an index) and imported back as a checkpoint holds the same parameters, the vocabulary cut
// to the tokenizer's 50257 rows and zero-padded to a multiple of TP; at TP 2 x PP 2 each shard is
// the block of the full tensor Megatron's partitioning gives that rank, cut here by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "hf_test_models.h"
#include "megatron/checkpoint/checkpoint.h"
#include "megatron/interop/huggingface.h"
#include "megatron/interop/loaded_model.h"
#include "tensor_expect.h"
#include "test_support.h"

namespace megatron::interop {
namespace {

// The GPT-2 tokenizer files of the tests.
tokenizer::TokenizerOptions gpt2_tokenizer() {
  tokenizer::TokenizerOptions options;
  options.vocab_file = testing::gpt2_vocab_file();
  options.merge_file = testing::gpt2_merges_file();
  return options;
}

namespace fs = std::filesystem;
using Named = std::vector<std::pair<std::string, at::Tensor>>;
using testing::expect_equal;
using testing::kGpt2Tokens;
using testing::named;

// `params` exported and written to <dir>/hf (shards of at most `shard_bytes`), then imported into
// <dir>/ckpt at tp x pp. Returns the import's model flags.
std::vector<std::string> export_and_import(const model::ModelConfig& c, const Named& params,
                                           const testing::TempDir& dir, int tp, int pp,
                                           std::uint64_t shard_bytes = std::uint64_t{1} << 40) {
  const HfExport out = to_hf(c, params, 50256, kGpt2Tokens);
  write_hf_folder(dir / "hf", out, gpt2_tokenizer(), 1024, shard_bytes);
  const HfImport imported =
      import_hf(dir / "hf", dir / "ckpt", tp, pp, 1, gpt2_tokenizer());
  return imported.model_flags;
}

// The full tensor as the import should give it: vocabulary rows cut to the tokenizer's and padded
// with zeros to `padded_rows`; every other tensor unchanged.
at::Tensor imported_form(const std::string& name, const at::Tensor& t, std::int64_t padded_rows) {
  if (name != "embedding.word_embeddings.weight" && name != "output_layer.weight") return t;
  return at::cat({t.slice(0, 0, kGpt2Tokens), at::zeros({padded_rows - kGpt2Tokens, t.size(1)})});
}

void expect_round_trip(const model::ModelConfig& c, std::uint64_t shard_bytes, const testing::TempDir& dir) {
  const Named params = testing::full_parameters(c);
  export_and_import(c, params, dir, 1, 1, shard_bytes);
  const checkpoint::CheckpointState saved = checkpoint::load_checkpoint(dir / "ckpt", 0, "mp_rank_00", false, false);
  ASSERT_EQ(saved.model.size(), params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(saved.model[i].first, params[i].first);
    expect_equal(saved.model[i].second, imported_form(params[i].first, params[i].second, kGpt2Tokens),
                 params[i].first);
  }
}

TEST(HfImport, Gpt2ExportThenImportReproducesTheParameters) {
  testing::TempDir dir("hf");
  expect_round_trip(testing::hf_gpt2_config(), std::uint64_t{1} << 40, dir);
  EXPECT_TRUE(fs::exists(dir.path() / "hf/model.safetensors"));
}

TEST(HfImport, LlamaExportThenImportReproducesTheParametersFromShards) {
  testing::TempDir dir("hf");
  // 1 MB shards: the embedding and lm_head (9.6 MB each) get one each, the layers share others.
  expect_round_trip(testing::hf_llama_config(), std::uint64_t{1} << 20, dir);
  EXPECT_TRUE(fs::exists(dir.path() / "hf/model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(dir.path() / "hf/model.safetensors"));
}

TEST(HfImport, FlagsDescribeTheImportedModel) {
  testing::TempDir dir("hf");
  const model::ModelConfig c = testing::hf_llama_config();
  const std::vector<std::string> flags = export_and_import(c, testing::full_parameters(c), dir, 2, 1);
  auto value_of = [&](const std::string& flag) {
    for (std::size_t i = 0; i + 1 < flags.size(); ++i) {
      if (flags[i] == flag) return flags[i + 1];
    }
    return std::string("(absent)");
  };
  EXPECT_EQ(value_of("--num-layers"), "2");
  EXPECT_EQ(value_of("--hidden-size"), "48");
  EXPECT_EQ(value_of("--ffn-hidden-size"), "64");
  EXPECT_EQ(value_of("--num-attention-heads"), "4");
  EXPECT_EQ(value_of("--num-query-groups"), "2");
  EXPECT_EQ(value_of("--kv-channels"), "12");
  EXPECT_EQ(value_of("--position-embedding-type"), "rope");
  EXPECT_EQ(value_of("--normalization"), "RMSNorm");
  EXPECT_EQ(value_of("--padded-vocab-size"), "50432");  // 50257 up to a multiple of 128 x TP 2
  for (const char* flag : {"--swiglu", "--untie-embeddings-and-output-weights", "--group-query-attention"}) {
    EXPECT_NE(std::find(flags.begin(), flags.end(), flag), flags.end()) << flag;
  }
  EXPECT_EQ(std::find(flags.begin(), flags.end(), "--disable-bias-linear"), flags.end());
}

// Rank r's block of dim `dim` of 2 (Megatron: column-parallel rows, row-parallel columns).
at::Tensor half(const at::Tensor& full, int dim, int r) {
  const std::int64_t n = full.size(dim) / 2;
  return full.slice(dim, r * n, (r + 1) * n);
}

TEST(HfImport, ShardsATp2Pp2CheckpointByMegatronsPartitioning) {
  testing::TempDir dir("hf");
  const model::ModelConfig c = testing::hf_gpt2_config();  // tied: the last stage holds a copy
  const Named params = testing::full_parameters(c);
  export_and_import(c, params, dir, 2, 2);
  auto shard = [&](const std::string& folder) {
    return checkpoint::load_checkpoint(dir / "ckpt", 0, folder, false, false).model;
  };
  const std::int64_t padded = 50432;
  const at::Tensor embedding = imported_form("embedding.word_embeddings.weight",
                                             named(params, "embedding.word_embeddings.weight"), padded);
  for (const int r : {0, 1}) {
    const std::string tp = r == 0 ? "00" : "01";
    // Stage 0: the embeddings and layer 0.
    const Named first = shard("mp_rank_" + tp + "_000");
    expect_equal(named(first, "embedding.word_embeddings.weight"), half(embedding, 0, r), "vocab rows, rank " + tp);
    expect_equal(named(first, "embedding.position_embeddings.weight"),
                 named(params, "embedding.position_embeddings.weight"), "positions, replicated");
    // The fused QKV in halves of whole query groups (2 of 4 groups: 72 of 144 rows).
    expect_equal(named(first, "decoder.layers.0.self_attention.linear_qkv.weight"),
                 half(named(params, "decoder.layers.0.self_attention.linear_qkv.weight"), 0, r), "qkv rows");
    // Stage 1: layer 1 renumbered 0, the final norm and the tied output layer.
    const Named last = shard("mp_rank_" + tp + "_001");
    expect_equal(named(last, "decoder.layers.0.self_attention.linear_proj.weight"),
                 half(named(params, "decoder.layers.1.self_attention.linear_proj.weight"), 1, r), "proj columns");
    expect_equal(named(last, "decoder.layers.0.mlp.linear_fc1.weight"),
                 half(named(params, "decoder.layers.1.mlp.linear_fc1.weight"), 0, r), "fc1 rows");
    expect_equal(named(last, "decoder.layers.0.mlp.linear_fc2.bias"),
                 named(params, "decoder.layers.1.mlp.linear_fc2.bias"), "fc2 bias, replicated");
    expect_equal(named(last, "decoder.final_layernorm.weight"), named(params, "decoder.final_layernorm.weight"),
                 "final norm");
    expect_equal(named(last, "output_layer.weight"), half(embedding, 0, r), "tied output copy, rank " + tp);
  }
  // Loaded back into one process (joined from the four shards): the full parameters again.
  const LoadedModel loaded = load_model(dir / "ckpt");
  EXPECT_EQ(loaded.saved_tp, 2);
  EXPECT_EQ(loaded.saved_pp, 2);
  for (const auto& [name, t] : loaded.model->named_parameters()) {
    expect_equal(t, imported_form(name, named(params, name), padded), name + " joined");
  }
}

}  // namespace
}  // namespace megatron::interop
