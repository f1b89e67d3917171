// GPT2LMHeadModel as a family descriptor (see hf_family.h): learned positions, LayerNorm, GeLU
// (gelu_new for Megatron's fused tanh GeLU, gelu for --no-bias-gelu-fusion), multi-head attention
// in one Conv1D ([in, out] layout), biases everywhere (zeros exported where Megatron has none).
#include <optional>

#include "hf_family.h"

namespace megatron::interop::detail {
namespace {

void read_gpt2(const HfFamilySpec&, const nlohmann::json&, HfConfigKeys& k, HfConfig& out, Problems& problems) {
  model::ModelConfig& c = out.model;
  const std::int64_t hidden = k.integer("n_embd", std::nullopt);
  const std::int64_t heads = k.integer("n_head", std::nullopt);
  if (hidden > 0 && heads > 0 && hidden % heads != 0) {
    problems.push_back(str_cat("n_embd ", hidden, " is not divisible by n_head ", heads,
                               ": GPT-2's heads split the hidden size evenly"));
  }
  const std::string act = k.text("activation_function", "gelu_new");
  // gelu_pytorch_tanh is gelu_new's function (the tanh approximation) in PyTorch's kernel.
  if (act != "gelu_new" && act != "gelu_pytorch_tanh" && act != "gelu") {
    problems.push_back("activation_function " + act +
                       ": megatron_train has gelu_new / gelu_pytorch_tanh (fused) and gelu (--no-bias-gelu-fusion)");
  }
  if (k.boolean("scale_attn_by_inverse_layer_idx", false)) problems.push_back("scale_attn_by_inverse_layer_idx: not in Megatron");
  if (!k.boolean("scale_attn_weights", true)) problems.push_back("scale_attn_weights false: Megatron scales by 1/sqrt(d)");
  if (k.boolean("add_cross_attention", false)) problems.push_back("add_cross_attention: a decoder-only GPT has none");
  c.num_layers = static_cast<int>(k.integer("n_layer", std::nullopt));
  c.hidden_size = static_cast<int>(hidden);
  c.num_attention_heads = static_cast<int>(heads);
  c.ffn_hidden_size = static_cast<int>(k.integer("n_inner", 4 * hidden));
  c.kv_channels = heads > 0 ? static_cast<int>(hidden / heads) : 0;
  c.seq_length = c.max_position_embeddings = static_cast<int>(k.integer("n_positions", 1024));
  c.norm_epsilon = k.real("layer_norm_epsilon", 1e-5);
  c.hidden_dropout = k.real("resid_pdrop", 0.1);
  c.attention_dropout = k.real("attn_pdrop", 0.1);
  c.bias_activation_fusion = act != "gelu";
  out.tie_word_embeddings = k.boolean("tie_word_embeddings", true);
}

nlohmann::ordered_json write_gpt2(const HfFamilySpec& spec, const model::ModelConfig& c, std::int64_t vocab) {
  return {{"architectures", {spec.architecture}},
          {"model_type", spec.model_type},
          {"vocab_size", vocab},
          {"n_positions", c.max_position_embeddings},
          {"n_ctx", c.max_position_embeddings},
          {"n_embd", c.hidden_size},
          {"n_layer", c.num_layers},
          {"n_head", c.num_attention_heads},
          {"n_inner", c.ffn_hidden_size},
          // Megatron's fused bias-GeLU is the tanh approximation (HF's gelu_new); unfused is erf.
          {"activation_function", c.bias_activation_fusion ? "gelu_new" : "gelu"},
          {"resid_pdrop", c.hidden_dropout},
          {"embd_pdrop", c.hidden_dropout},
          {"attn_pdrop", c.attention_dropout},
          {"layer_norm_epsilon", c.norm_epsilon},
          {"initializer_range", c.init_method_std},
          {"scale_attn_weights", true}};
}

HfTensorMap gpt2_tensors(const HfFamilySpec& spec, const model::ModelConfig& c, std::int64_t vocab) {
  using T = HfTransform;
  const std::int64_t h = c.hidden_size, ffn = c.ffn_hidden_size;
  HfTensorMap m;
  auto add = [&](std::string megatron, T transform, const std::string& hf, HfShape shape, bool zeros = false) {
    m.push_back({std::move(megatron), transform, {hf}, {std::move(shape)}, zeros});
  };
  add("embedding.word_embeddings.weight", T::kVocabRows, "transformer.wte.weight", {vocab, h});
  add("embedding.position_embeddings.weight", T::kSame, "transformer.wpe.weight", {c.max_position_embeddings, h});
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = hf_layer(spec, i);
    add(megatron_layer(i, "input_layernorm.weight"), T::kSame, p + "ln_1.weight", {h});
    add(megatron_layer(i, "input_layernorm.bias"), T::kSame, p + "ln_1.bias", {h});
    add(megatron_layer(i, "self_attention.linear_qkv.weight"), T::kQkvConv1d, p + "attn.c_attn.weight", {h, 3 * h});
    add(megatron_layer(i, "self_attention.linear_qkv.bias"), T::kQkvConcat, p + "attn.c_attn.bias", {3 * h}, true);
    add(megatron_layer(i, "self_attention.linear_proj.weight"), T::kTranspose, p + "attn.c_proj.weight", {h, h});
    add(megatron_layer(i, "self_attention.linear_proj.bias"), T::kSame, p + "attn.c_proj.bias", {h}, true);
    add(megatron_layer(i, "pre_mlp_layernorm.weight"), T::kSame, p + "ln_2.weight", {h});
    add(megatron_layer(i, "pre_mlp_layernorm.bias"), T::kSame, p + "ln_2.bias", {h});
    add(megatron_layer(i, "mlp.linear_fc1.weight"), T::kTranspose, p + "mlp.c_fc.weight", {h, ffn});
    add(megatron_layer(i, "mlp.linear_fc1.bias"), T::kSame, p + "mlp.c_fc.bias", {ffn}, true);
    add(megatron_layer(i, "mlp.linear_fc2.weight"), T::kTranspose, p + "mlp.c_proj.weight", {ffn, h});
    add(megatron_layer(i, "mlp.linear_fc2.bias"), T::kSame, p + "mlp.c_proj.bias", {h}, true);
  }
  add("decoder.final_layernorm.weight", T::kSame, "transformer.ln_f.weight", {h});
  add("decoder.final_layernorm.bias", T::kSame, "transformer.ln_f.bias", {h});
  if (c.untie_embeddings_and_output_weights) add("output_layer.weight", T::kVocabRows, "lm_head.weight", {vocab, h});
  return m;
}

}  // namespace

const HfFamilySpec& gpt2_family() {
  static const HfFamilySpec spec{.family = HfFamily::kGpt2,
                                 .architecture = "GPT2LMHeadModel",
                                 .model_type = "gpt2",
                                 .name = "GPT-2",
                                 .layers_key = "n_layer",
                                 .layer_prefix = "transformer.h.",
                                 .embedding = "transformer.wte.weight",
                                 .bare_prefix = "transformer.",
                                 .read_config = read_gpt2,
                                 .write_config = write_gpt2,
                                 .tensor_map = gpt2_tensors};
  return spec;
}

}  // namespace megatron::interop::detail
