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

TEST(HfConfig, FlagsDescribeTheModel) {
  HfConfig c = read_hf_config(llama(), "hf/config.json");
  c.model.padded_vocab_size = 50304;
  c.model.untie_embeddings_and_output_weights = true;
  const std::vector<std::string> flags = megatron_model_flags(c.model);
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
