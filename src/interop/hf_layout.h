// HuggingFace's tensor layouts against Megatron's (private to src/interop): the fused QKV rows
// grouped per query group, the tensors of an HF folder, and the names and shapes its config.json
// implies (checked before anything is reshaped).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
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

// Every tensor of an HF folder (one model.safetensors, or the shards its index names), as fp32.
// GPT-2's names are given transformers' "transformer." prefix where the file has none (as
// OpenAI's original checkpoints), so that each tensor has one name.
std::map<std::string, at::Tensor> read_hf_tensors(const std::filesystem::path& dir, HfFamily family);

// The Llama-style families with experts (Mixtral, Qwen3-MoE) and with query/key norms (Qwen3,
// Qwen3-MoE).
bool hf_has_experts(HfFamily family);
bool hf_has_qk_norms(HfFamily family);

// Where a family keeps an MoE layer's router and each expert's SwiGLU projections, under the
// layer's prefix `layer` ("model.layers.<i>."): the hub's names, one tensor per expert (Mixtral's
// block_sparse_moe.gate and experts.<j>.w1/w3/w2, Qwen3-MoE's mlp.gate and
// experts.<j>.gate_proj/up_proj/down_proj).
std::string hf_router_name(HfFamily family, const std::string& layer);
struct HfExpertNames {
  std::string gate, up, down;
};
HfExpertNames hf_expert_names(HfFamily family, const std::string& layer, int expert);

// transformers' in-memory form of the experts, as a model's state_dict holds them
// (mlp.experts.gate_up_proj [E, 2F, h] with each expert's gate rows first, mlp.experts.down_proj
// [E, h, F], and Mixtral's router renamed to mlp.gate), rewritten under the hub's per-expert names.
// Hub-form tensors are left as they are.
void split_fused_experts(std::map<std::string, at::Tensor>& tensors, HfFamily family);

using HfShapes = std::vector<std::pair<std::string, std::vector<std::int64_t>>>;

// The tensors a family's file holds for `c` (HF names and layouts: GPT-2's Conv1D [in, out], the
// Llama-style families' separate projections, the experts per expert) with a `vocab`-row
// embedding; lm_head.weight when `lm_head`.
HfShapes hf_tensor_shapes(HfFamily family, const model::ModelConfig& c, std::int64_t vocab, bool lm_head);

// The transformer layers the file holds: one more than the largest index of transformer.h.<i>.
// (GPT-2) or model.layers.<i>. (Llama) among the names.
std::int64_t hf_layers_in(const std::map<std::string, at::Tensor>& tensors, HfFamily family);

// Every expected tensor present with its shape, or throws megatron::Error listing each one that is
// missing or of another shape ("<name> has shape [16, 32]; config.json needs [32, 32]"); `where`
// names the folder.
void check_hf_tensors(const std::map<std::string, at::Tensor>& tensors, const HfShapes& expected,
                      const std::string& where);

}  // namespace megatron::interop::detail
