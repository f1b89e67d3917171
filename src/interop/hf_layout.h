// HuggingFace's tensor layouts against Megatron's (private to src/interop): the fused QKV rows
// grouped per query group, the transforms of a family's tensor map (hf_family.h), the tensors of
// an HF folder, and the check of their names and shapes against what config.json implies (before
// anything is reshaped).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "megatron/interop/huggingface.h"
#include "megatron/model/model_config.h"

namespace megatron::interop::detail {

// Megatron's fused QKV rows are grouped by query group: [q heads of the group; k; v] per group.
struct Qkv {
  at::Tensor q, k, v;
};
Qkv split_qkv(const at::Tensor& w, const model::ModelConfig& c);
// Inverse of split_qkv.
at::Tensor join_qkv(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const model::ModelConfig& c);

using HfShape = std::vector<std::int64_t>;

// How one Megatron parameter (single-process, full) becomes HF tensors, and back.
enum class HfTransform {
  kSame,           // one tensor as it is
  kTranspose,      // one tensor transposed (GPT-2's Conv1D keeps [in, out])
  kVocabRows,      // the vocabulary's rows: cut to HF's vocab_size on export, zero-padded to Megatron's on import
  kQkv,            // Megatron's fused QKV (rows grouped per query group) <-> q, k, v
  kQkvConcat,      // <-> one tensor [all q; all k; all v] (GPT-2's c_attn bias)
  kQkvConv1d,      // <-> one tensor [all q; all k; all v] transposed (GPT-2's c_attn weight)
  kGateUp,         // Megatron's [gate; up] rows <-> gate, up
  kExpertsGateUp,  // [E, 2F, h] (each expert's [gate; up]) <-> gate_0, up_0, gate_1, up_1, ...
  kExperts,        // [E, ...] <-> one tensor per expert
};

struct HfTensorRule {
  std::string megatron;          // the single-process parameter name
  HfTransform transform = HfTransform::kSame;
  std::vector<std::string> hf;   // HF names, in the transform's order
  std::vector<HfShape> shapes;   // each HF tensor's shape, as config.json implies it
  // GPT-2's biases: HF always has them, Megatron not with --disable-bias-linear; zeros are exact.
  bool zeros_when_absent = false;
};
using HfTensorMap = std::vector<HfTensorRule>;

// The HF tensors of one Megatron parameter, and the parameter from its HF tensors (in the rule's
// order; kVocabRows pads to c.padded_vocab_size).
std::vector<at::Tensor> to_hf_tensors(const HfTensorRule& rule, const at::Tensor& megatron, const model::ModelConfig& c);
at::Tensor from_hf_tensors(const HfTensorRule& rule, const std::vector<at::Tensor>& hf, const model::ModelConfig& c);

// Every tensor of an HF folder (one model.safetensors, or the shards its index names), as fp32.
// A family with a bare prefix (GPT-2's "transformer.") gives it to names the file has without it
// (OpenAI's original checkpoints), so that each tensor has one name.
std::map<std::string, at::Tensor> read_hf_tensors(const std::filesystem::path& dir, HfFamily family);

// transformers' in-memory form of the experts, as a model's state_dict holds them
// (mlp.experts.gate_up_proj [E, 2F, h] with each expert's gate rows first, mlp.experts.down_proj
// [E, h, F], and the router under mlp.gate), rewritten under the family's per-expert hub names.
// Hub-form tensors are left as they are.
void split_fused_experts(std::map<std::string, at::Tensor>& tensors, HfFamily family);

// The transformer layers the file holds: one more than the largest index after the family's
// layer prefix (transformer.h.<i>. for GPT-2, model.layers.<i>. for the Llama-style families).
std::int64_t hf_layers_in(const std::map<std::string, at::Tensor>& tensors, HfFamily family);

// Every tensor of `map` present with its shape, or throws megatron::Error listing each one that is
// missing or of another shape ("<name> has shape [16, 32]; config.json needs [32, 32]"); `where`
// names the folder.
void check_hf_tensors(const std::map<std::string, at::Tensor>& tensors, const HfTensorMap& map, const std::string& where);

}  // namespace megatron::interop::detail
