// HuggingFace's tensor layouts against Megatron's (private to src/interop): the fused QKV rows
// grouped per query group, and the tensors of an HF folder.
#pragma once

#include <ATen/ATen.h>

#include <filesystem>
#include <map>
#include <string>

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
std::map<std::string, at::Tensor> read_hf_tensors(const std::filesystem::path& dir);

}  // namespace megatron::interop::detail
