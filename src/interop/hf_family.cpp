// Which HuggingFace family holds a Megatron model (see huggingface.h), and the registry of the
// families' descriptors (hf_family.h). The Llama-style families differ in two settings:
// --qk-layernorm (Qwen3) and --num-experts (Mixtral without query/key norms, Qwen3-MoE with them).
#include <string>
#include <vector>

#include "megatron/core/check.h"
#include "megatron/core/strings.h"
#include "hf_family.h"
#include "megatron/interop/huggingface.h"

namespace megatron::interop {
namespace {

using detail::Problems;

void refuse(Problems& problems, bool bad, const std::string& what) {
  if (bad) problems.push_back(what);
}

// What Mixtral's and Qwen3-MoE's routers and experts share: a softmax over all experts' logits,
// top-k without groups, scaling or bias, dropless, no shared expert.
void check_moe(const model::ModelConfig& c, const std::string& family, Problems& problems) {
  const model::MoeConfig& m = c.moe;
  refuse(problems, m.shared_expert_intermediate_size > 0,
         "--moe-shared-expert-intermediate-size: " + family + " has no shared expert");
  refuse(problems, m.score_function != model::RouterScore::kSoftmax,
         "--moe-router-score-function sigmoid: " + family + "'s router takes a softmax");
  refuse(problems, m.router_topk_scaling_factor > 0, "--moe-router-topk-scaling-factor: " + family + " does not scale");
  refuse(problems, m.router_group_topk > 0, "--moe-router-group-topk: " + family + " routes over all experts");
  refuse(problems, m.router_enable_expert_bias, "--moe-router-enable-expert-bias: " + family + "'s router has no bias");
  refuse(problems, m.expert_capacity_factor > 0, "--moe-expert-capacity-factor: " + family + " drops no tokens");
}

// RoPE + RMSNorm + SwiGLU: Llama, Mixtral, Qwen3 or Qwen3-MoE.
HfFamily llama_style_family(const model::ModelConfig& c, Problems& problems) {
  const bool moe = c.moe.enabled();
  const HfFamily family = moe ? (c.qk_layernorm ? HfFamily::kQwen3Moe : HfFamily::kMixtral)
                              : (c.qk_layernorm ? HfFamily::kQwen3 : HfFamily::kLlama);
  const std::string name = detail::hf_family(family).name;
  refuse(problems, c.rotary_percent != 1.0,
         "--rotary-percent " + python_float_repr(c.rotary_percent) + ": " + name + " rotates whole heads");
  refuse(problems, c.rotary_interleaved, "--rotary-interleaved: " + name + " rotates halves, not pairs");
  if (moe) check_moe(c, name, problems);
  if (family == HfFamily::kMixtral) {
    const model::MoeConfig& m = c.moe;
    refuse(problems, m.num_moe_layers(c.num_layers) != c.num_layers,
           "--moe-layer-freq " + model::moe_layer_freq_text({m.layer_freq, m.layer_pattern}) +
               ": every Mixtral layer is an MoE layer (Qwen3-MoE, with --qk-layernorm, mixes dense layers in)");
    refuse(problems, m.router_pre_softmax,
           "--moe-router-pre-softmax: Mixtral takes the softmax of the top-k logits (Qwen3-MoE, with "
           "--qk-layernorm, has both)");
  }
  if (family != HfFamily::kLlama) {
    refuse(problems, c.add_bias_linear, "linear biases: " + name + " has none in its MLP (--disable-bias-linear)");
  }
  return family;
}

}  // namespace

HfFamily hf_family_of(const model::ModelConfig& c) {
  const bool rope = c.position_embedding == model::PositionEmbedding::kRope;
  const bool rms = c.normalization == model::Normalization::kRmsNorm;
  Problems problems;
  if (rope && rms && c.swiglu) {
    const HfFamily family = llama_style_family(c, problems);
    if (problems.empty()) return family;
  } else if (!rope && !rms && !c.swiglu) {
    refuse(problems, c.num_query_groups != c.num_attention_heads,
           "--group-query-attention --num-query-groups " + std::to_string(c.num_query_groups) +
               ": GPT-2 has one key/value head per query head");
    refuse(problems, c.kv_channels * c.num_attention_heads != c.hidden_size,
           "--kv-channels " + std::to_string(c.kv_channels) + ": GPT-2's head size is --hidden-size / --num-attention-heads");
    refuse(problems, c.qk_layernorm, "--qk-layernorm: GPT-2 has no query/key norms (Qwen3 has them)");
    refuse(problems, c.moe.enabled(),
           "--num-experts: GPT-2 has no experts (Mixtral and Qwen3-MoE take rope + RMSNorm + --swiglu)");
    if (problems.empty()) return HfFamily::kGpt2;
  } else {
    problems.push_back(std::string("--position-embedding-type ") + (rope ? "rope" : "learned_absolute") +
                       ", --normalization " + (rms ? "RMSNorm" : "LayerNorm") + (c.swiglu ? ", --swiglu" : ", GeLU") +
                       ": HuggingFace's GPT-2 takes learned_absolute + LayerNorm + GeLU and Llama (Mixtral, Qwen3, "
                       "Qwen3-MoE) rope + RMSNorm + --swiglu; this mix is neither");
  }
  throw_if_problems("this model cannot be written in HuggingFace's format", problems, ProblemHeading::kList);
  MEGATRON_FAIL("internal error: no HuggingFace family and no problem found");
}

const char* hf_architecture(HfFamily family) { return detail::hf_family(family).architecture; }
const char* hf_model_type(HfFamily family) { return detail::hf_family(family).model_type; }

namespace detail {

std::span<const HfFamilySpec* const> hf_families() {
  static const std::vector<const HfFamilySpec*> all = [] {
    std::vector<const HfFamilySpec*> v{&gpt2_family()};
    for (const HfFamilySpec* spec : llama_style_families()) v.push_back(spec);
    return v;
  }();
  return all;
}

const HfFamilySpec& hf_family(HfFamily family) {
  for (const HfFamilySpec* spec : hf_families()) {
    if (spec->family == family) return *spec;
  }
  MEGATRON_FAIL("internal error: no descriptor for HuggingFace family ", static_cast<int>(family));
}

}  // namespace detail
}  // namespace megatron::interop
