// config.json files that leave a key out read as transformers reads them: each family's default
// (hf_config_reference.py: AutoConfig on a config with every key, then without each optional one).
#include <gtest/gtest.h>

#include <fstream>

#include "hf_config.h"
#include "test_support.h"

namespace megatron::interop::detail {
namespace {

using nlohmann::json;

// The value of `name` in the model read from the config, as the reference names it.
double value_of(const HfConfig& c, const std::string& name) {
  const model::ModelConfig& m = c.model;
  if (name == "num_query_groups") return m.num_query_groups;
  if (name == "kv_channels") return m.kv_channels;
  if (name == "max_position_embeddings") return m.max_position_embeddings;
  if (name == "rotary_base") return m.rotary_base;
  if (name == "norm_epsilon") return m.norm_epsilon;
  if (name == "ffn_hidden_size") return m.ffn_hidden_size;
  if (name == "hidden_dropout") return m.hidden_dropout;
  if (name == "attention_dropout") return m.attention_dropout;
  if (name == "tie_word_embeddings") return c.tie_word_embeddings;
  if (name == "num_experts") return m.moe.num_experts;
  if (name == "router_topk") return m.moe.router_topk;
  if (name == "aux_loss_coeff") return m.moe.aux_loss_coeff;
  if (name == "moe_ffn_hidden_size") return m.moe.ffn_hidden_size;
  if (name == "router_pre_softmax") return m.moe.router_pre_softmax;
  ADD_FAILURE() << "the reference names " << name << ", which this test does not read";
  return 0;
}

TEST(HfConfigReference, KeysLeftOutTakeTheFamilysDefault) {
  const auto dir = testing::fixture_reference("hf_config_reference", "hf_config_reference");
  std::ifstream in(dir / "cases.json");
  const json cases = json::parse(in);
  ASSERT_GE(cases.size(), 40u);
  for (const json& one : cases) {
    const std::string family = one.at("config").at("model_type").get<std::string>();
    const std::string left_out = one.at("left_out").get<std::string>();
    SCOPED_TRACE(family + " without " + (left_out.empty() ? "nothing" : left_out));
    const HfConfig c = read_hf_config(one.at("config"), family + "/config.json");
    for (const auto& [name, expected] : one.at("expected").items()) {
      const double want = expected.is_boolean() ? expected.get<bool>() : expected.get<double>();
      EXPECT_DOUBLE_EQ(value_of(c, name), want) << name;
    }
  }
}

}  // namespace
}  // namespace megatron::interop::detail
