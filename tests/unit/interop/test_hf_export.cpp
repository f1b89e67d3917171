// The HuggingFace export's names, shapes and layouts against transformers' own: the expected
// state-dict keys below are GPT2LMHeadModel's and LlamaForCausalLM's (transformers 5, as
// model.state_dict() lists them; a tied lm_head is left out, as save_pretrained does), written
// out by hand. GPT-2's Conv1D stores [in, out], the transpose of Megatron's Linear [out, in].
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hf_test_models.h"
#include "megatron/core/check.h"
#include "megatron/interop/huggingface.h"
#include "tensor_expect.h"
#include "test_support.h"

namespace megatron::interop {
namespace {

using Shapes = std::map<std::string, std::vector<std::int64_t>>;
using testing::expect_equal;
using testing::named;

// GPT2LMHeadModel's keys for n_layer layers, n_embd h, n_inner ffn, n_positions positions.
Shapes gpt2_keys(int layers, std::int64_t h, std::int64_t ffn, std::int64_t vocab, std::int64_t positions, bool tied) {
  Shapes k = {{"transformer.wte.weight", {vocab, h}},
              {"transformer.wpe.weight", {positions, h}},
              {"transformer.ln_f.weight", {h}},
              {"transformer.ln_f.bias", {h}}};
  for (int i = 0; i < layers; ++i) {
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    k[p + "ln_1.weight"] = {h};
    k[p + "ln_1.bias"] = {h};
    k[p + "attn.c_attn.weight"] = {h, 3 * h};
    k[p + "attn.c_attn.bias"] = {3 * h};
    k[p + "attn.c_proj.weight"] = {h, h};
    k[p + "attn.c_proj.bias"] = {h};
    k[p + "ln_2.weight"] = {h};
    k[p + "ln_2.bias"] = {h};
    k[p + "mlp.c_fc.weight"] = {h, ffn};
    k[p + "mlp.c_fc.bias"] = {ffn};
    k[p + "mlp.c_proj.weight"] = {ffn, h};
    k[p + "mlp.c_proj.bias"] = {h};
  }
  if (!tied) k["lm_head.weight"] = {vocab, h};
  return k;
}

// LlamaForCausalLM's keys: `heads` query heads and `kv_heads` key/value heads of head_dim `hd`.
Shapes llama_keys(int layers, std::int64_t h, std::int64_t ffn, std::int64_t heads, std::int64_t kv_heads,
                  std::int64_t hd, std::int64_t vocab, bool bias, bool tied) {
  Shapes k = {{"model.embed_tokens.weight", {vocab, h}}, {"model.norm.weight", {h}}};
  for (int i = 0; i < layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    k[p + "input_layernorm.weight"] = {h};
    k[p + "self_attn.q_proj.weight"] = {heads * hd, h};
    k[p + "self_attn.k_proj.weight"] = {kv_heads * hd, h};
    k[p + "self_attn.v_proj.weight"] = {kv_heads * hd, h};
    k[p + "self_attn.o_proj.weight"] = {h, heads * hd};
    k[p + "post_attention_layernorm.weight"] = {h};
    k[p + "mlp.gate_proj.weight"] = {ffn, h};
    k[p + "mlp.up_proj.weight"] = {ffn, h};
    k[p + "mlp.down_proj.weight"] = {h, ffn};
    if (bias) {
      k[p + "self_attn.q_proj.bias"] = {heads * hd};
      k[p + "self_attn.k_proj.bias"] = {kv_heads * hd};
      k[p + "self_attn.v_proj.bias"] = {kv_heads * hd};
      k[p + "self_attn.o_proj.bias"] = {h};
      k[p + "mlp.gate_proj.bias"] = {ffn};
      k[p + "mlp.up_proj.bias"] = {ffn};
      k[p + "mlp.down_proj.bias"] = {h};
    }
  }
  if (!tied) k["lm_head.weight"] = {vocab, h};
  return k;
}

Shapes shapes_of(const HfExport& out) {
  Shapes s;
  for (const auto& [name, t] : out.tensors) {
    EXPECT_TRUE(s.emplace(name, t.sizes().vec()).second) << name << " written twice";
  }
  return s;
}

TEST(HfExport, Gpt2TensorsAreTransformersStateDictKeys) {
  for (const bool tied : {true, false}) {
    model::ModelConfig c = testing::hf_gpt2_config();
    c.untie_embeddings_and_output_weights = !tied;
    const HfExport out = to_hf(c, testing::full_parameters(c), 0, testing::kGpt2Tokens);
    EXPECT_EQ(out.family, HfFamily::kGpt2);
    EXPECT_EQ(shapes_of(out), gpt2_keys(2, 48, 96, testing::kGpt2Tokens, 20, tied)) << (tied ? "tied" : "untied");
  }
}

TEST(HfExport, LlamaTensorsAreTransformersStateDictKeys) {
  for (const bool bias : {true, false}) {
    for (const bool tied : {true, false}) {
      model::ModelConfig c = testing::hf_llama_config();
      c.add_bias_linear = bias;
      c.untie_embeddings_and_output_weights = !tied;
      const HfExport out = to_hf(c, testing::full_parameters(c), 0, testing::kGpt2Tokens);
      EXPECT_EQ(out.family, HfFamily::kLlama);
      EXPECT_EQ(shapes_of(out), llama_keys(2, 48, 64, 4, 2, 12, testing::kGpt2Tokens, bias, tied))
          << (bias ? "with" : "without") << " biases, " << (tied ? "tied" : "untied");
    }
  }
}

TEST(HfExport, Gpt2LinearWeightsAreTransposedIntoConv1D) {
  const model::ModelConfig c = testing::hf_gpt2_config();
  const auto params = testing::full_parameters(c);
  const HfExport out = to_hf(c, params, 0, testing::kGpt2Tokens);
  const std::vector<std::pair<std::string, std::string>> linears = {
      {"self_attention.linear_proj", "attn.c_proj"}, {"mlp.linear_fc1", "mlp.c_fc"}, {"mlp.linear_fc2", "mlp.c_proj"}};
  for (const auto& [megatron, hf] : linears) {
    for (const int i : {0, 1}) {
      const at::Tensor w = named(params, "decoder.layers." + std::to_string(i) + "." + megatron + ".weight");
      const at::Tensor got = named(out.tensors, "transformer.h." + std::to_string(i) + "." + hf + ".weight");
      ASSERT_EQ(got.sizes(), (std::vector<std::int64_t>{w.size(1), w.size(0)})) << hf;
      for (std::int64_t o = 0; o < w.size(0); o += 7) {  // element [in, out] of Conv1D is [out, in] of Linear
        for (std::int64_t in = 0; in < w.size(1); in += 5) {
          EXPECT_EQ(got[in][o].item<float>(), w[o][in].item<float>()) << hf << " [" << in << ", " << o << "]";
        }
      }
    }
  }
  expect_equal(named(out.tensors, "transformer.h.1.mlp.c_fc.bias"),
               named(params, "decoder.layers.1.mlp.linear_fc1.bias"), "c_fc.bias");
  expect_equal(named(out.tensors, "transformer.ln_f.weight"), named(params, "decoder.final_layernorm.weight"), "ln_f");
}

TEST(HfExport, CutsThePaddedVocabularyToTheTokenizers) {
  model::ModelConfig c = testing::hf_llama_config();  // untied: both embedding and lm_head
  const auto params = testing::full_parameters(c);
  const HfExport out = to_hf(c, params, 0, testing::kGpt2Tokens);
  expect_equal(named(out.tensors, "model.embed_tokens.weight"),
               named(params, "embedding.word_embeddings.weight").slice(0, 0, testing::kGpt2Tokens), "embed_tokens");
  expect_equal(named(out.tensors, "lm_head.weight"),
               named(params, "output_layer.weight").slice(0, 0, testing::kGpt2Tokens), "lm_head");
  EXPECT_EQ(out.config.at("vocab_size"), testing::kGpt2Tokens);
  const std::string message = testing::error_of([&] { to_hf(c, params, 0, c.padded_vocab_size + 1); });
  testing::expect_contains(message, {"50305", "50304", "another tokenizer"});
}

TEST(HfExport, ConfigUsesTransformersKeys) {
  const HfExport gpt2 = to_hf(testing::hf_gpt2_config(), testing::full_parameters(testing::hf_gpt2_config()), 7,
                              testing::kGpt2Tokens);
  const nlohmann::ordered_json& g = gpt2.config;
  EXPECT_EQ(g.at("model_type"), "gpt2");
  EXPECT_EQ(g.at("architectures"), nlohmann::ordered_json::array({"GPT2LMHeadModel"}));
  EXPECT_EQ(g.at("n_layer"), 2);
  EXPECT_EQ(g.at("n_embd"), 48);
  EXPECT_EQ(g.at("n_head"), 4);
  EXPECT_EQ(g.at("n_inner"), 96);
  EXPECT_EQ(g.at("n_positions"), 20);
  EXPECT_EQ(g.at("activation_function"), "gelu_new");  // Megatron's fused GeLU is the tanh form
  EXPECT_EQ(g.at("tie_word_embeddings"), true);
  EXPECT_EQ(g.at("eos_token_id"), 7);
  EXPECT_EQ(gpt2.generation_config.at("pad_token_id"), 7);

  model::ModelConfig c = testing::hf_llama_config();
  c.rotary_base = 500000;
  const HfExport llama = to_hf(c, testing::full_parameters(c), 7, testing::kGpt2Tokens);
  const nlohmann::ordered_json& l = llama.config;
  EXPECT_EQ(l.at("model_type"), "llama");
  EXPECT_EQ(l.at("architectures"), nlohmann::ordered_json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(l.at("num_hidden_layers"), 2);
  EXPECT_EQ(l.at("hidden_size"), 48);
  EXPECT_EQ(l.at("intermediate_size"), 64);
  EXPECT_EQ(l.at("num_attention_heads"), 4);
  EXPECT_EQ(l.at("num_key_value_heads"), 2);
  EXPECT_EQ(l.at("head_dim"), 12);
  EXPECT_EQ(l.at("rope_theta"), 500000.0);
  EXPECT_EQ(l.at("attention_bias"), true);
  EXPECT_EQ(l.at("mlp_bias"), true);
  EXPECT_EQ(l.at("tie_word_embeddings"), false);
}

TEST(HfFamily, RefusesModelsNeitherFamilyHoldsNamingTheSetting) {
  model::ModelConfig mixed = testing::hf_gpt2_config();
  mixed.position_embedding = model::PositionEmbedding::kRope;  // RoPE with LayerNorm and GeLU
  testing::expect_contains(testing::error_of([&] { hf_family_of(mixed); }),
                           {"--position-embedding-type rope", "LayerNorm", "neither"});
  model::ModelConfig gqa = testing::hf_gpt2_config();
  gqa.num_query_groups = 2;
  testing::expect_contains(testing::error_of([&] { hf_family_of(gqa); }), {"--num-query-groups 2", "GPT-2"});
  model::ModelConfig partial = testing::hf_llama_config();
  partial.rotary_percent = 0.5;
  partial.rotary_interleaved = true;  // both problems reported together
  testing::expect_contains(testing::error_of([&] { hf_family_of(partial); }),
                           {"--rotary-percent", "--rotary-interleaved"});
  // A mixture of experts is Mixtral's only when every setting is Mixtral's, each other one named.
  model::ModelConfig moe = testing::hf_llama_config();
  moe.add_bias_linear = false;
  moe.moe.num_experts = 4;
  EXPECT_EQ(hf_family_of(moe), HfFamily::kMixtral);
  moe.moe.shared_expert_intermediate_size = 32;
  moe.moe.router_pre_softmax = true;
  moe.moe.layer_freq = 2;
  testing::expect_contains(testing::error_of([&] { hf_family_of(moe); }),
                           {"Mixtral has no shared expert", "--moe-router-pre-softmax", "--moe-layer-freq 2"});
  // With query/key norms the same settings but the shared expert are Qwen3-MoE's; Qwen3 has no biases.
  moe.qk_layernorm = true;
  moe.moe.shared_expert_intermediate_size = 0;
  EXPECT_EQ(hf_family_of(moe), HfFamily::kQwen3Moe);
  model::ModelConfig qwen3 = testing::hf_llama_config();
  qwen3.qk_layernorm = true;
  testing::expect_contains(testing::error_of([&] { hf_family_of(qwen3); }), {"linear biases: Qwen3 has none"});
  qwen3.add_bias_linear = false;
  EXPECT_EQ(hf_family_of(qwen3), HfFamily::kQwen3);
  model::ModelConfig gpt2 = testing::hf_gpt2_config();
  gpt2.qk_layernorm = true;
  testing::expect_contains(testing::error_of([&] { hf_family_of(gpt2); }), {"--qk-layernorm: GPT-2"});
}

// Qwen3-MoE as the hub's files hold it (transformers' Qwen3MoeForCausalLM.save_pretrained): q_norm
// and k_norm per layer, the router as mlp.gate, experts.<j>.gate_proj/up_proj/down_proj, and the
// dense layers' plain MLP, listed in config.json's mlp_only_layers.
TEST(HfExport, Qwen3MoeLayersAreTheHubsTensors) {
  model::ModelConfig c = testing::hf_llama_config();
  c.add_bias_linear = false;
  c.qk_layernorm = true;
  c.moe.num_experts = 3;
  c.moe.ffn_hidden_size = 40;
  c.moe.layer_pattern = {0, 1};
  c.moe.router_pre_softmax = true;
  const auto params = testing::full_parameters(c);
  const HfExport out = to_hf(c, params, 0, testing::kGpt2Tokens);
  EXPECT_EQ(out.family, HfFamily::kQwen3Moe);
  std::map<std::string, at::Tensor> hf(out.tensors.begin(), out.tensors.end());
  std::map<std::string, at::Tensor> ours(params.begin(), params.end());
  const at::Tensor fc1 = ours.at("decoder.layers.1.mlp.experts.linear_fc1.weight");
  EXPECT_TRUE(at::equal(hf.at("model.layers.1.mlp.experts.2.gate_proj.weight"), fc1[2].narrow(0, 0, 40)));
  EXPECT_TRUE(at::equal(hf.at("model.layers.1.mlp.experts.2.up_proj.weight"), fc1[2].narrow(0, 40, 40)));
  EXPECT_TRUE(at::equal(hf.at("model.layers.1.mlp.experts.1.down_proj.weight"),
                        ours.at("decoder.layers.1.mlp.experts.linear_fc2.weight")[1]));
  EXPECT_TRUE(at::equal(hf.at("model.layers.1.mlp.gate.weight"), ours.at("decoder.layers.1.mlp.router.weight")));
  EXPECT_TRUE(at::equal(hf.at("model.layers.0.mlp.gate_proj.weight"),
                        ours.at("decoder.layers.0.mlp.linear_fc1.weight").narrow(0, 0, 64)));
  EXPECT_TRUE(at::equal(hf.at("model.layers.0.self_attn.q_norm.weight"),
                        ours.at("decoder.layers.0.self_attention.q_layernorm.weight")));
  EXPECT_EQ(hf.at("model.layers.1.self_attn.k_norm.weight").sizes(), at::IntArrayRef({12}));
  EXPECT_EQ(hf.count("model.layers.0.mlp.gate.weight"), 0u);
  EXPECT_EQ(out.config.at("model_type"), "qwen3_moe");
  EXPECT_EQ(out.config.at("architectures")[0], "Qwen3MoeForCausalLM");
  EXPECT_EQ(out.config.at("mlp_only_layers"), nlohmann::ordered_json::array({0}));
  EXPECT_EQ(out.config.at("decoder_sparse_step"), 1);
  EXPECT_EQ(out.config.at("norm_topk_prob"), false);
  EXPECT_EQ(out.config.at("num_experts"), 3);
  EXPECT_EQ(out.config.at("moe_intermediate_size"), 40);
  EXPECT_EQ(out.config.at("intermediate_size"), 64);
}

// Mixtral's experts under the hub's names: block_sparse_moe.gate, experts.<j>.w1 (gate), w3 (up)
// and w2, each expert's block of Megatron's stacked tensors.
TEST(HfExport, MixtralExpertsAreTheHubsPerExpertTensors) {
  model::ModelConfig c = testing::hf_llama_config();
  c.add_bias_linear = false;
  c.moe.num_experts = 3;
  c.moe.ffn_hidden_size = 40;
  const auto params = testing::full_parameters(c);
  const HfExport out = to_hf(c, params, 0, testing::kGpt2Tokens);
  EXPECT_EQ(out.family, HfFamily::kMixtral);
  std::map<std::string, at::Tensor> hf(out.tensors.begin(), out.tensors.end());
  std::map<std::string, at::Tensor> ours(params.begin(), params.end());
  const at::Tensor fc1 = ours.at("decoder.layers.1.mlp.experts.linear_fc1.weight");
  EXPECT_TRUE(at::equal(hf.at("model.layers.1.block_sparse_moe.experts.2.w1.weight"), fc1[2].narrow(0, 0, 40)));
  EXPECT_TRUE(at::equal(hf.at("model.layers.1.block_sparse_moe.experts.2.w3.weight"), fc1[2].narrow(0, 40, 40)));
  EXPECT_TRUE(at::equal(hf.at("model.layers.1.block_sparse_moe.experts.0.w2.weight"),
                        ours.at("decoder.layers.1.mlp.experts.linear_fc2.weight")[0]));
  EXPECT_TRUE(at::equal(hf.at("model.layers.0.block_sparse_moe.gate.weight"), ours.at("decoder.layers.0.mlp.router.weight")));
  EXPECT_EQ(hf.count("model.layers.0.mlp.gate_proj.weight"), 0u);
  EXPECT_EQ(out.config.at("num_local_experts"), 3);
  EXPECT_EQ(out.config.at("intermediate_size"), 40);
  EXPECT_EQ(out.config.at("model_type"), "mixtral");
}

}  // namespace
}  // namespace megatron::interop
