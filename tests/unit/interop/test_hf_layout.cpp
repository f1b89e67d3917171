// Megatron's fused QKV layout against HuggingFace's separate projections. Megatron groups the
// fused rows by query group ([the group's query heads; its key head; its value head] per group);
// HF keeps all query heads, then all key heads, then all value heads (GPT-2 in one Conv1D, Llama
// in q_proj / k_proj / v_proj). Every row of the tensors below carries a code naming its head and
// row, so a test sees exactly which row lands where.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hf_layout.h"
#include "hf_test_models.h"
#include "megatron/interop/huggingface.h"
#include "tensor_expect.h"

namespace megatron::interop {
namespace {

using testing::expect_equal;
using testing::named;

// A row's code: 1000 for a query head, 2000 for a key head, 3000 for a value head, plus 100 x the
// head's number (a key/value head is numbered by its query group) plus the row within the head.
float code(int kind, int head, int row) { return static_cast<float>(1000 * kind + 100 * head + row); }

// Rows with the given codes; with `columns` > 0 a weight [rows, columns] whose column j adds
// j / 64 (exact in fp32) so that a transposition or column mix-up shows too.
at::Tensor coded(const std::vector<float>& codes, std::int64_t columns) {
  const at::Tensor rows = at::tensor(codes, at::kFloat);
  if (columns == 0) return rows;
  return rows.unsqueeze(1) + at::arange(columns, at::kFloat).unsqueeze(0) / 64;
}

// Megatron's fused rows, written out: per group g, its heads g * per .. g * per + per - 1, then
// key head g, then value head g.
std::vector<float> megatron_order(const model::ModelConfig& c) {
  const int per = c.num_attention_heads / c.num_query_groups;
  std::vector<float> codes;
  for (int g = 0; g < c.num_query_groups; ++g) {
    for (int j = 0; j < per; ++j) {
      for (int d = 0; d < c.kv_channels; ++d) codes.push_back(code(1, g * per + j, d));
    }
    for (int d = 0; d < c.kv_channels; ++d) codes.push_back(code(2, g, d));
    for (int d = 0; d < c.kv_channels; ++d) codes.push_back(code(3, g, d));
  }
  return codes;
}

// HF's rows of one kind (1 q, 2 k, 3 v): every head of that kind in order.
std::vector<float> hf_order(int kind, int heads, int head_dim) {
  std::vector<float> codes;
  for (int h = 0; h < heads; ++h) {
    for (int d = 0; d < head_dim; ++d) codes.push_back(code(kind, h, d));
  }
  return codes;
}

TEST(HfLayout, SplitQkvTakesEachGroupsHeadsApart) {
  for (const model::ModelConfig& c : {testing::hf_gpt2_config(), testing::hf_llama_config()}) {
    const std::string what = std::to_string(c.num_query_groups) + " groups";
    ASSERT_EQ(static_cast<int>(megatron_order(c).size()), c.qkv_size());
    for (const std::int64_t columns : {std::int64_t{0}, std::int64_t{c.hidden_size}}) {  // bias, weight
      const detail::Qkv qkv = detail::split_qkv(coded(megatron_order(c), columns), c);
      expect_equal(qkv.q, coded(hf_order(1, c.num_attention_heads, c.kv_channels), columns), what + " q");
      expect_equal(qkv.k, coded(hf_order(2, c.num_query_groups, c.kv_channels), columns), what + " k");
      expect_equal(qkv.v, coded(hf_order(3, c.num_query_groups, c.kv_channels), columns), what + " v");
    }
  }
}

TEST(HfLayout, JoinQkvRegroupsPerQueryGroup) {
  const model::ModelConfig c = testing::hf_llama_config();
  const std::int64_t h = c.hidden_size;
  const at::Tensor joined = detail::join_qkv(coded(hf_order(1, 4, 12), h), coded(hf_order(2, 2, 12), h),
                                             coded(hf_order(3, 2, 12), h), c);
  expect_equal(joined, coded(megatron_order(c), h), "joined weight");
}

TEST(HfLayout, SplitAndJoinAreInverses) {
  for (const model::ModelConfig& c : {testing::hf_gpt2_config(), testing::hf_llama_config()}) {
    const at::Tensor w = at::randn({c.qkv_size(), c.hidden_size});
    const at::Tensor b = at::randn({c.qkv_size()});
    for (const at::Tensor& t : {w, b}) {
      const detail::Qkv qkv = detail::split_qkv(t, c);
      expect_equal(detail::join_qkv(qkv.q, qkv.k, qkv.v, c), t, "join(split(x))");
      const detail::Qkv again = detail::split_qkv(detail::join_qkv(qkv.q, qkv.k, qkv.v, c), c);
      expect_equal(again.q, qkv.q, "split(join(q, k, v)).q");
      expect_equal(again.k, qkv.k, "split(join(q, k, v)).k");
      expect_equal(again.v, qkv.v, "split(join(q, k, v)).v");
    }
  }
}

// A model's parameters with layer 1's fused QKV weight and bias replaced by coded rows.
std::vector<std::pair<std::string, at::Tensor>> with_coded_qkv(const model::ModelConfig& c) {
  auto params = testing::full_parameters(c);
  for (auto& [name, t] : params) {
    if (name == "decoder.layers.1.self_attention.linear_qkv.weight") t = coded(megatron_order(c), c.hidden_size);
    if (name == "decoder.layers.1.self_attention.linear_qkv.bias") t = coded(megatron_order(c), 0);
  }
  return params;
}

TEST(HfExport, Gpt2AttentionConv1DHoldsAllQueriesThenKeysThenValuesAsColumns) {
  const model::ModelConfig c = testing::hf_gpt2_config();
  const HfExport out = to_hf(c, with_coded_qkv(c), 0, testing::kGpt2Tokens);
  const std::int64_t h = c.hidden_size;
  const at::Tensor rows = at::cat({coded(hf_order(1, 4, 12), h), coded(hf_order(2, 4, 12), h),
                                   coded(hf_order(3, 4, 12), h)});  // [3h, h]: Linear's [out, in]
  expect_equal(named(out.tensors, "transformer.h.1.attn.c_attn.weight"), rows.t(), "c_attn.weight, Conv1D [in, out]");
  expect_equal(named(out.tensors, "transformer.h.1.attn.c_attn.bias"),
               at::cat({coded(hf_order(1, 4, 12), 0), coded(hf_order(2, 4, 12), 0), coded(hf_order(3, 4, 12), 0)}),
               "c_attn.bias");
}

TEST(HfExport, LlamaProjectionsHoldTheirHeadsInOrder) {
  const model::ModelConfig c = testing::hf_llama_config();  // 4 query heads, 2 key/value heads
  const HfExport out = to_hf(c, with_coded_qkv(c), 0, testing::kGpt2Tokens);
  const std::int64_t h = c.hidden_size;
  const std::string p = "model.layers.1.self_attn.";
  expect_equal(named(out.tensors, p + "q_proj.weight"), coded(hf_order(1, 4, 12), h), "q_proj.weight");
  expect_equal(named(out.tensors, p + "k_proj.weight"), coded(hf_order(2, 2, 12), h), "k_proj.weight");
  expect_equal(named(out.tensors, p + "v_proj.weight"), coded(hf_order(3, 2, 12), h), "v_proj.weight");
  expect_equal(named(out.tensors, p + "q_proj.bias"), coded(hf_order(1, 4, 12), 0), "q_proj.bias");
  expect_equal(named(out.tensors, p + "k_proj.bias"), coded(hf_order(2, 2, 12), 0), "k_proj.bias");
  expect_equal(named(out.tensors, p + "v_proj.bias"), coded(hf_order(3, 2, 12), 0), "v_proj.bias");
}

TEST(HfExport, LlamaFc1IsGateThenUp) {
  const model::ModelConfig c = testing::hf_llama_config();
  const auto params = testing::full_parameters(c);
  const HfExport out = to_hf(c, params, 0, testing::kGpt2Tokens);
  const at::Tensor fc1 = named(params, "decoder.layers.0.mlp.linear_fc1.weight");  // [2 ffn, h]
  const at::Tensor fc1_bias = named(params, "decoder.layers.0.mlp.linear_fc1.bias");
  expect_equal(named(out.tensors, "model.layers.0.mlp.gate_proj.weight"), fc1.slice(0, 0, 64), "gate_proj.weight");
  expect_equal(named(out.tensors, "model.layers.0.mlp.up_proj.weight"), fc1.slice(0, 64, 128), "up_proj.weight");
  expect_equal(named(out.tensors, "model.layers.0.mlp.gate_proj.bias"), fc1_bias.slice(0, 0, 64), "gate_proj.bias");
  expect_equal(named(out.tensors, "model.layers.0.mlp.up_proj.bias"), fc1_bias.slice(0, 64, 128), "up_proj.bias");
}

// transformers' in-memory experts (Qwen3MoeExperts / MixtralExperts: gate_up_proj [E, 2F, h] with
// each expert's gate rows first, down_proj [E, h, F]) become the hub's per-expert tensors.
TEST(HfLayout, FusedExpertsSplitIntoTheHubsPerExpertTensors) {
  const at::Tensor gate_up = at::arange(2 * 6 * 3, at::kFloat).reshape({2, 6, 3});
  const at::Tensor down = at::arange(2 * 3 * 3, at::kFloat).reshape({2, 3, 3}) + 100;
  std::map<std::string, at::Tensor> t{{"model.layers.1.mlp.experts.gate_up_proj", gate_up},
                                      {"model.layers.1.mlp.experts.down_proj", down},
                                      {"model.layers.1.mlp.gate.weight", at::ones({2, 3})}};
  std::map<std::string, at::Tensor> mixtral = t;
  detail::split_fused_experts(t, HfFamily::kQwen3Moe);
  EXPECT_EQ(t.size(), 7u);  // the router and 2 x 3 projections
  expect_equal(t.at("model.layers.1.mlp.experts.1.gate_proj.weight"), gate_up[1].narrow(0, 0, 3), "1.gate_proj.weight");
  expect_equal(t.at("model.layers.1.mlp.experts.1.up_proj.weight"), gate_up[1].narrow(0, 3, 3), "1.up_proj.weight");
  expect_equal(t.at("model.layers.1.mlp.experts.0.down_proj.weight"), down[0], "0.down_proj.weight");
  EXPECT_EQ(t.count("model.layers.1.mlp.gate.weight"), 1u);
  detail::split_fused_experts(mixtral, HfFamily::kMixtral);
  expect_equal(mixtral.at("model.layers.1.block_sparse_moe.experts.0.w3.weight"), gate_up[0].narrow(0, 3, 3), "0.w3.weight");
  expect_equal(mixtral.at("model.layers.1.block_sparse_moe.experts.1.w2.weight"), down[1], "1.w2.weight");
  EXPECT_EQ(mixtral.count("model.layers.1.block_sparse_moe.gate.weight"), 1u);
  EXPECT_EQ(mixtral.count("model.layers.1.mlp.gate.weight"), 0u);
}

}  // namespace
}  // namespace megatron::interop
