// What the import checks in an HF folder before it reshapes anything: the output layer tied as
// transformers ties it on load (config.json's tie_word_embeddings, unless the file holds a
// different lm_head.weight: then untied), every tensor's shape against the one config.json
// implies (refused naming the tensor, its shape and the expected shape, never a LibTorch error or
// silent zero padding), and the layer count against the file's. Folders are exports of the tiny
// test models, edited by hand the way a hostile or broken folder would be.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "hf_test_models.h"
#include "megatron/checkpoint/checkpoint.h"
#include "megatron/checkpoint/safetensors.h"
#include "megatron/core/file_io.h"
#include "megatron/interop/huggingface.h"
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

// `c` exported to <dir>/hf with `rows` vocabulary rows; `edit_config` and `edit_tensors` then
// change config.json and model.safetensors.
void write_folder(const model::ModelConfig& c, const Named& params, const fs::path& hf,
                  const std::function<void(nlohmann::ordered_json&)>& edit_config = {},
                  const std::function<void(Named&)>& edit_tensors = {}, std::int64_t rows = kGpt2Tokens) {
  HfExport out = to_hf(c, params, 50256, rows);
  if (edit_config) edit_config(out.config);
  if (edit_tensors) edit_tensors(out.tensors);
  write_hf_folder(hf, out, gpt2_tokenizer(), 1024, std::uint64_t{1} << 40);
}

HfImport import(const testing::TempDir& dir) {
  return import_hf(dir / "hf", dir / "ckpt", 1, 1, 1, gpt2_tokenizer());
}

std::string refusal(const testing::TempDir& dir) {
  const std::string message = testing::error_of([&] { import(dir); });
  EXPECT_FALSE(fs::exists(fs::path(dir / "ckpt") / checkpoint::kTrackerFile)) << "a refused import wrote a checkpoint";
  return message;
}

bool has_flag(const HfImport& imported, const std::string& flag) {
  return std::find(imported.model_flags.begin(), imported.model_flags.end(), flag) != imported.model_flags.end();
}

Named saved_model(const testing::TempDir& dir) {
  return checkpoint::load_checkpoint(dir / "ckpt", 0, "mp_rank_00", false, false).model;
}

TEST(HfImportChecks, ATiedConfigWithADifferentLmHeadImportsUntiedAsTransformersLoadsIt) {
  for (const bool llama : {false, true}) {
    testing::TempDir dir("hf");
    model::ModelConfig c = llama ? testing::hf_llama_config() : testing::hf_gpt2_config();
    c.untie_embeddings_and_output_weights = true;  // an export with both tensors, then called tied
    const Named params = testing::full_parameters(c);
    write_folder(c, params, dir / "hf", [](nlohmann::ordered_json& j) { j["tie_word_embeddings"] = true; });
    const HfImport imported = import(dir);
    EXPECT_TRUE(has_flag(imported, "--untie-embeddings-and-output-weights")) << (llama ? "llama" : "gpt2");
    ASSERT_EQ(imported.notes.size(), 1u);
    testing::expect_contains(imported.notes[0], {"tie_word_embeddings", "lm_head.weight differs", "untied"});
    const Named saved = saved_model(dir);
    expect_equal(named(saved, "output_layer.weight"), named(params, "output_layer.weight").slice(0, 0, kGpt2Tokens),
                 "the file's lm_head");
    expect_equal(named(saved, "embedding.word_embeddings.weight"),
                 named(params, "embedding.word_embeddings.weight").slice(0, 0, kGpt2Tokens), "the file's embedding");
  }
}

TEST(HfImportChecks, ATiedConfigWithAnEqualLmHeadStaysTied) {
  testing::TempDir dir("hf");
  const model::ModelConfig c = testing::hf_gpt2_config();
  write_folder(c, testing::full_parameters(c), dir / "hf", {}, [](Named& t) {
    t.emplace_back("lm_head.weight", named(t, "transformer.wte.weight").clone());  // as torch .bin files hold it
  });
  const HfImport imported = import(dir);
  EXPECT_FALSE(has_flag(imported, "--untie-embeddings-and-output-weights"));
  EXPECT_TRUE(imported.notes.empty());
}

TEST(HfImportChecks, RefusesKeyValueHeadsThatDoNotMatchTheTensors) {
  testing::TempDir dir("hf");
  const model::ModelConfig c = testing::hf_llama_config();  // 4 heads in 2 groups of head size 12
  // null is one key/value head per query head in transformers: 4 x 12 rows, the file has 2 x 12.
  write_folder(c, testing::full_parameters(c), dir / "hf",
               [](nlohmann::ordered_json& j) { j["num_key_value_heads"] = nullptr; });
  const std::string message = refusal(dir);
  testing::expect_contains(message, {"the tensors do not match config.json",
                                     "model.layers.0.self_attn.k_proj.weight has shape [24, 48]; config.json needs [48, 48]",
                                     "model.layers.1.self_attn.v_proj.weight has shape [24, 48]"});
  EXPECT_EQ(message.find("LibTorch"), std::string::npos) << message;
}

TEST(HfImportChecks, RefusesAWrongHeadDim) {
  testing::TempDir dir("hf");
  const model::ModelConfig c = testing::hf_llama_config();
  write_folder(c, testing::full_parameters(c), dir / "hf", [](nlohmann::ordered_json& j) { j["head_dim"] = 16; });
  testing::expect_contains(refusal(dir), {"model.layers.0.self_attn.q_proj.weight has shape [48, 48]; config.json needs [64, 48]",
                                          "model.layers.0.self_attn.o_proj.weight has shape [48, 48]; config.json needs [48, 64]",
                                          "more tensors"});  // 4 per layer and the biases: only the first few listed
}

TEST(HfImportChecks, RefusesAVocabularyOtherThanTheEmbeddingRows) {
  const model::ModelConfig c = testing::hf_gpt2_config();
  const Named params = testing::full_parameters(c);
  {  // more rows than vocab_size (the export keeps Megatron's 50304 padded rows, config.json says 50257)
    testing::TempDir dir("hf");
    write_folder(c, params, dir / "hf", [](nlohmann::ordered_json& j) { j["vocab_size"] = kGpt2Tokens; }, {}, 50304);
    testing::expect_contains(refusal(dir), {"transformer.wte.weight has shape [50304, 48]; config.json needs [50257, 48]"});
  }
  {  // vocab_size past the rows: these were zero-padded without a word
    testing::TempDir dir("hf");
    write_folder(c, params, dir / "hf", [](nlohmann::ordered_json& j) { j["vocab_size"] = 50400; });
    testing::expect_contains(refusal(dir), {"transformer.wte.weight has shape [50257, 48]; config.json needs [50400, 48]"});
  }
}

TEST(HfImportChecks, RefusesALayerCountOtherThanTheFiles) {
  const model::ModelConfig c = testing::hf_llama_config();  // 2 layers
  const Named params = testing::full_parameters(c);
  for (const int layers : {1, 3}) {
    testing::TempDir dir("hf");
    write_folder(c, params, dir / "hf", [&](nlohmann::ordered_json& j) { j["num_hidden_layers"] = layers; });
    testing::expect_contains(refusal(dir), {"num_hidden_layers is " + std::to_string(layers),
                                            "the safetensors files hold 2 layers"});
  }
}

TEST(HfImportChecks, RefusesAMissingTensorByName) {
  testing::TempDir dir("hf");
  const model::ModelConfig c = testing::hf_gpt2_config();
  write_folder(c, testing::full_parameters(c), dir / "hf", {}, [](Named& t) {
    t.erase(std::find_if(t.begin(), t.end(), [](const auto& p) { return p.first == "transformer.h.1.ln_2.bias"; }));
  });
  testing::expect_contains(refusal(dir), {"transformer.h.1.ln_2.bias is missing; config.json needs it with shape [48]"});
}

}  // namespace
}  // namespace megatron::interop

namespace megatron::interop {
namespace {

// The tokenizer an import takes from a folder: tokenizer.json, unless it is a kind this build does
// not read (a Unigram model) and tokenizer.model is beside it.
TEST(HfImportChecks, ATokenizerJsonOfAnotherKindFallsBackToTokenizerModel) {
  for (const std::string kind : {"Unigram", "BPE"}) {
    testing::TempDir dir("hf");
    std::ofstream(dir.path() / "tokenizer.json") << R"({"model": {"type": ")" + kind + R"("}})";
    std::ofstream(dir.path() / "tokenizer.model") << '\x0a';
    const tokenizer::TokenizerOptions o = hf_folder_tokenizer(dir.path().string(), {});
    if (kind == "BPE") {
      EXPECT_EQ(o.type, tokenizer::TokenizerType::kHuggingFace);
    } else {
      EXPECT_EQ(o.type, tokenizer::TokenizerType::kLlama2);  // transformers' LlamaTokenizer over the model
      EXPECT_EQ(std::filesystem::path(o.tokenizer_model).filename(), "tokenizer.model");
    }
  }
}

}  // namespace
}  // namespace megatron::interop
