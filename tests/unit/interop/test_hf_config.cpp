// config.json read as Megatron's model: integers read as integers and range-checked (never
// narrowed: 4294967298 is not 2, 2.7 is not 2), every bad key named with its value and reported
// together, an unsupported model_type said as such, transformers' defaults for keys left null, and
// the megatron_train flags of the result.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "hf_config.h"
#include "megatron/core/check.h"
#include "test_support.h"

namespace megatron::interop::detail {
namespace {

using nlohmann::json;

json llama() {
  return {{"model_type", "llama"},  {"vocab_size", 50257},       {"hidden_size", 48}, {"intermediate_size", 64},
          {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2}};
}

json gpt2() {
  return {{"model_type", "gpt2"}, {"vocab_size", 50257}, {"n_embd", 48}, {"n_layer", 2}, {"n_head", 4},
          {"n_positions", 20}};
}

json qwen3_moe() {
  return {{"model_type", "qwen3_moe"},    {"vocab_size", 50257},      {"hidden_size", 48},
          {"intermediate_size", 64},      {"moe_intermediate_size", 32}, {"num_hidden_layers", 6},
          {"num_attention_heads", 4},     {"num_key_value_heads", 2}, {"head_dim", 16},
          {"num_experts", 8},             {"num_experts_per_tok", 2}, {"norm_topk_prob", true},
          {"decoder_sparse_step", 2},     {"mlp_only_layers", {3}}};
}

std::string refusal(const json& config) {
  return testing::error_of([&] { read_hf_config(config, "hf/config.json"); });
}

TEST(HfConfig, ReadsLlamaSizes) {
  const HfConfig c = read_hf_config(llama(), "hf/config.json");
  EXPECT_EQ(c.family, HfFamily::kLlama);
  EXPECT_EQ(c.vocab_size, 50257);
  EXPECT_EQ(c.model.num_layers, 2);
  EXPECT_EQ(c.model.num_query_groups, 2);
  EXPECT_EQ(c.model.kv_channels, 12);  // head_dim absent: hidden_size / num_attention_heads
  EXPECT_FALSE(c.tie_word_embeddings);  // LlamaConfig's default
}

TEST(HfConfig, NullKeysTakeTransformersDefaults) {
  json j = llama();
  j["num_key_value_heads"] = nullptr;  // LlamaConfig: None means one key/value head per query head
  j["head_dim"] = nullptr;
  EXPECT_EQ(read_hf_config(j, "hf/config.json").model.num_query_groups, 4);
  json g = gpt2();
  g["n_inner"] = nullptr;  // GPT2Config: None means 4 x n_embd
  const HfConfig c = read_hf_config(g, "hf/config.json");
  EXPECT_EQ(c.model.ffn_hidden_size, 192);
  EXPECT_TRUE(c.tie_word_embeddings);  // GPT2Config's default
}

TEST(HfConfig, IntegersAreNotNarrowed) {
  // Each of these used to become a small int: 2^32 + 2 wrapped to 2, 2.7 truncated to 2, 1e12 wrapped.
  for (const auto& [value, shown] : std::vector<std::pair<json, std::string>>{
           {json(4294967298ULL), "n_layer is 4294967298"},
           {json(2.7), "n_layer is 2.7"},
           {json(1e12), "n_layer is 1000000000000.0"},
           {json(4.0), "n_layer is 4.0"},
           {json(-3), "n_layer is -3"},
           {json(0), "n_layer is 0"},
           {json("4"), "n_layer is \"4\""}}) {
    json j = gpt2();
    j["n_layer"] = value;
    testing::expect_contains(refusal(j), {"hf/config.json", shown, "expected a whole number from 1 to 2147483647"});
  }
}

TEST(HfConfig, ReportsEveryBadKeyTogether) {
  json j = llama();
  j["hidden_size"] = 2.5;
  j["num_attention_heads"] = 9999999999LL;
  j["vocab_size"] = nullptr;
  j["rms_norm_eps"] = "small";
  j["tie_word_embeddings"] = "yes";
  testing::expect_contains(refusal(j), {"hidden_size is 2.5", "num_attention_heads is 9999999999", "vocab_size: missing",
                                        "rms_norm_eps is \"small\"; expected a number",
                                        "tie_word_embeddings is \"yes\"; expected true or false"});
}

TEST(HfConfig, RefusesADerivedSizeOutOfRange) {
  json g = gpt2();
  g["n_embd"] = 1073741824;  // n_inner absent: 4 x n_embd does not fit Megatron's int sizes
  g["n_head"] = 1;
  testing::expect_contains(refusal(g), {"n_inner: not given, and its default from the other sizes is 4294967296"});
}

TEST(HfConfig, SaysAnUnsupportedModelTypeIsUnsupported) {
  json j = llama();
  j["model_type"] = "mistral";
  j.erase("vocab_size");
  const std::string message = refusal(j);
  testing::expect_contains(message, {"model_type 'mistral' is not supported", "gpt2", "llama"});
  EXPECT_EQ(message.find("vocab_size"), std::string::npos) << message;
  j.erase("model_type");
  testing::expect_contains(refusal(j), {"hf/config.json: no model_type"});
}

TEST(HfConfig, RefusesGpt2HeadsThatDoNotSplitTheHiddenSize) {
  json g = gpt2();
  g["n_head"] = 5;
  testing::expect_contains(refusal(g), {"n_embd 48 is not divisible by n_head 5"});
}

// transformers' Qwen3MoeDecoderLayer has experts where (i + 1) % decoder_sparse_step == 0 and i
// is not in mlp_only_layers; norm_topk_prob renormalises the top-k (Megatron's default), its
// absence (false) is --moe-router-pre-softmax.
TEST(HfConfig, ReadsQwen3MoeLayersRouterAndHeads) {
  const HfConfig c = read_hf_config(qwen3_moe(), "hf/config.json");
  EXPECT_EQ(c.family, HfFamily::kQwen3Moe);
  EXPECT_TRUE(c.model.qk_layernorm);
  EXPECT_EQ(c.model.kv_channels, 16);
  EXPECT_EQ(c.model.ffn_hidden_size, 64);
  EXPECT_EQ(c.model.moe.ffn_hidden_size, 32);
  EXPECT_EQ(c.model.moe.num_experts, 8);
  EXPECT_FALSE(c.model.moe.router_pre_softmax);
  EXPECT_EQ(c.model.moe.layer_pattern, (std::vector<int>{0, 1, 0, 0, 0, 1}));
  const std::vector<std::string> flags = c.model.flags();
  const auto at = std::find(flags.begin(), flags.end(), "--moe-layer-freq");
  ASSERT_NE(at, flags.end());
  EXPECT_EQ(*(at + 1), "[0,1,0,0,0,1]");
  EXPECT_NE(std::find(flags.begin(), flags.end(), "--qk-layernorm"), flags.end());
  EXPECT_EQ(std::find(flags.begin(), flags.end(), "--moe-router-pre-softmax"), flags.end());

  json j = qwen3_moe();
  for (const char* key : {"norm_topk_prob", "decoder_sparse_step", "mlp_only_layers", "num_experts"}) j.erase(key);
  j["num_local_experts"] = 4;  // transformers' save_pretrained writes the attribute's other name
  const HfConfig d = read_hf_config(j, "hf/config.json");
  EXPECT_TRUE(d.model.moe.router_pre_softmax);
  EXPECT_TRUE(d.model.moe.layer_pattern.empty());
  EXPECT_EQ(d.model.moe.num_moe_layers(6), 6);
  EXPECT_EQ(d.model.moe.num_experts, 4);
  j["num_local_experts"] = 0;  // no experts: a dense Qwen3 with query/key norms
  const HfConfig dense = read_hf_config(j, "hf/config.json");
  EXPECT_FALSE(dense.model.moe.enabled());
  EXPECT_TRUE(dense.model.qk_layernorm);
}

TEST(HfConfig, Qwen3HeadSizeDefaultAndWhatItCannotBe) {
  json q = llama();
  q["model_type"] = "qwen3";
  EXPECT_EQ(read_hf_config(q, "hf/config.json").model.kv_channels, 128);  // Qwen3Config's head_dim
  q["use_sliding_window"] = true;
  q["sliding_window"] = 16;
  q["max_window_layers"] = 2;  // no layer from 2 on: no sliding layer
  EXPECT_EQ(read_hf_config(q, "hf/config.json").family, HfFamily::kQwen3);
  q["max_window_layers"] = 1;
  q["attention_bias"] = true;
  testing::expect_contains(refusal(q), {"sliding_window 16", "attention_bias: Qwen3's MLP has no biases"});
  json m = qwen3_moe();
  m["mlp_only_layers"] = "3";
  m["num_experts_per_tok"] = 9;
  testing::expect_contains(refusal(m), {"mlp_only_layers is \"3\"; expected a list of whole numbers",
                                        "num_experts_per_tok 9 is more than num_experts 8"});
  // Top-1 routing: with the softmax over all experts (norm_topk_prob false) it is Megatron's
  // --moe-router-pre-softmax; renormalised over the one chosen expert it is not, and the refusal
  // says why instead of naming a megatron_train flag the converter does not have.
  json top1 = qwen3_moe();
  top1["num_experts_per_tok"] = 1;
  top1["norm_topk_prob"] = false;
  EXPECT_TRUE(read_hf_config(top1, "hf/config.json").model.moe.router_pre_softmax);
  top1["norm_topk_prob"] = true;
  const std::string why = refusal(top1);
  testing::expect_contains(why, {"num_experts_per_tok 1 with norm_topk_prob: each token's one expert is weighed by 1"});
  EXPECT_EQ(why.find("Please use"), std::string::npos) << why;
}

TEST(HfConfig, FlagsDescribeTheModel) {
  HfConfig c = read_hf_config(llama(), "hf/config.json");
  c.model.padded_vocab_size = 50304;
  c.model.untie_embeddings_and_output_weights = true;
  const std::vector<std::string> flags = c.model.flags();
  auto value_of = [&](const std::string& flag) {
    const auto it = std::find(flags.begin(), flags.end(), flag);
    return it != flags.end() && it + 1 != flags.end() ? *(it + 1) : std::string("(absent)");
  };
  EXPECT_EQ(value_of("--num-layers"), "2");
  EXPECT_EQ(value_of("--num-query-groups"), "2");
  EXPECT_EQ(value_of("--rotary-base"), "10000");
  EXPECT_EQ(value_of("--padded-vocab-size"), "50304");
  for (const char* flag : {"--swiglu", "--group-query-attention", "--untie-embeddings-and-output-weights",
                           "--disable-bias-linear"}) {
    EXPECT_NE(std::find(flags.begin(), flags.end(), flag), flags.end()) << flag;
  }
}

}  // namespace
}  // namespace megatron::interop::detail
