// Megatron-Core's sharded names in a torch_dist checkpoint, from this build's parameter names (the
// names of the whole model: global layer numbers, no chunk prefix). Megatron stacks the transformer
// layers: "decoder.layers.<g>.<rest>" is block <g> of the leading layer axis of
// "decoder.layers.<rest>"; and it saves the layer norms under Transformer Engine's fused names
// whatever the layer spec (input_layernorm as self_attention.linear_qkv.layer_norm_*, the MLP's
// pre_mlp_layernorm as mlp.linear_fc1.layer_norm_*). Every other name is the same in both.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace megatron::checkpoint {

// This build's own record of the run (SavedRun's JSON, as text) among the Megatron args it writes:
// read back exactly here; to Megatron an attribute it does not know.
inline constexpr const char* kRunRecordArg = "megatron_cpp_run";

struct TorchDistKey {
  std::string key;
  std::optional<int> layer;  // the block of the leading layer axis; none: not a layer's tensor
};

// The names a parameter may have in a torch_dist checkpoint, the one Megatron writes with the
// default layer spec first (an MoE layer's pre-MLP norm is fused into no linear layer under
// Transformer Engine's spec, and is under its own name there; the local spec renames it anyway).
std::vector<TorchDistKey> torch_dist_keys(const std::string& full_name);

}  // namespace megatron::checkpoint
