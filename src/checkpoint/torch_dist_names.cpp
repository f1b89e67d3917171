// This build's parameter names as Megatron-Core's torch_dist checkpoints name them (see
// torch_dist_names.h); Megatron's TransformerLayer sharded_state_dict_keys_map, in our words.
#include "torch_dist_names.h"

#include <string_view>

namespace megatron::checkpoint {
namespace {

constexpr std::string_view kLayers = "decoder.layers.";

// Local-spec module prefix -> Transformer Engine's name for it, within a layer.
struct Renamed {
  std::string_view from, to;
};
constexpr Renamed kFusedNorms[] = {
    {"input_layernorm.", "self_attention.linear_qkv.layer_norm_"},
    {"pre_mlp_layernorm.", "mlp.linear_fc1.layer_norm_"},
};

}  // namespace

std::vector<TorchDistKey> torch_dist_keys(const std::string& full_name) {
  if (!full_name.starts_with(kLayers)) return {{full_name, std::nullopt}};
  const std::size_t dot = full_name.find('.', kLayers.size());
  const std::string number = full_name.substr(kLayers.size(), dot - kLayers.size());
  if (dot == std::string::npos || number.empty() || number.find_first_not_of("0123456789") != std::string::npos) {
    return {{full_name, std::nullopt}};
  }
  const int layer = std::stoi(number);
  const std::string rest = full_name.substr(dot + 1);
  const std::string stacked = std::string(kLayers) + rest;
  for (const Renamed& r : kFusedNorms) {
    if (rest.starts_with(r.from)) {
      const std::string fused = std::string(kLayers) + std::string(r.to) + rest.substr(r.from.size());
      return {{fused, layer}, {stacked, layer}};
    }
  }
  return {{stacked, layer}};
}

}  // namespace megatron::checkpoint
