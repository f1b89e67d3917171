// The mixture-of-experts part of the model's configuration, as Megatron-Core's TransformerConfig
// has it (num_moe_experts and the moe_* fields): which layers are MoE layers, the router, the
// load-balancing losses, the experts' size and token dropping. Plain values, no LibTorch; the
// flags of the same names fill it and checkpoints carry it under Megatron's argument names.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "megatron/core/enum_names.h"

namespace megatron::model {

// --moe-router-score-function.
enum class RouterScore { kSoftmax, kSigmoid };
// --moe-router-load-balancing-type (sinkhorn is not built).
enum class LoadBalancing { kAuxLoss, kSeqAuxLoss, kNone };
// --moe-token-drop-policy: with a capacity, keep each expert's highest-probability tokens, or its
// earliest ones.
enum class TokenDropPolicy { kProbs, kPosition };
// --moe-token-dispatcher-type: how tokens reach the ranks of their experts (same results, other
// communication): all-gathered over TP x EP, or sent with all-to-alls over EP.
enum class TokenDispatcher { kAllGather, kAllToAll };

inline constexpr std::array<EnumName<RouterScore>, 2> kRouterScoreNames{{
    {RouterScore::kSoftmax, "softmax"}, {RouterScore::kSigmoid, "sigmoid"}}};
inline constexpr std::array<EnumName<LoadBalancing>, 3> kLoadBalancingNames{{
    {LoadBalancing::kAuxLoss, "aux_loss"}, {LoadBalancing::kSeqAuxLoss, "seq_aux_loss"}, {LoadBalancing::kNone, "none"}}};
inline constexpr std::array<EnumName<TokenDropPolicy>, 2> kTokenDropPolicyNames{{
    {TokenDropPolicy::kProbs, "probs"}, {TokenDropPolicy::kPosition, "position"}}};
inline constexpr std::array<EnumName<TokenDispatcher>, 2> kTokenDispatcherNames{{
    {TokenDispatcher::kAllGather, "allgather"}, {TokenDispatcher::kAllToAll, "alltoall"}}};
inline std::span<const EnumName<RouterScore>> enum_names(RouterScore) { return kRouterScoreNames; }
inline std::span<const EnumName<LoadBalancing>> enum_names(LoadBalancing) { return kLoadBalancingNames; }
inline std::span<const EnumName<TokenDropPolicy>> enum_names(TokenDropPolicy) { return kTokenDropPolicyNames; }
inline std::span<const EnumName<TokenDispatcher>> enum_names(TokenDispatcher) { return kTokenDispatcherNames; }

struct MoeConfig {
  int num_experts = 0;  // 0: a dense model (Megatron's None)
  // Layer i (0-based) is an MoE layer when i % layer_freq == 0 (Megatron's integer --moe-layer-freq),
  // or, when layer_pattern is given (its list form), when layer_pattern[i] is 1 (0: dense).
  int layer_freq = 1;
  std::vector<int> layer_pattern;
  int ffn_hidden_size = 0;                // --moe-ffn-hidden-size; 0: --ffn-hidden-size
  int shared_expert_intermediate_size = 0;  // 0: no shared expert
  int router_topk = 2;
  RouterScore score_function = RouterScore::kSoftmax;
  bool router_pre_softmax = false;
  double router_topk_scaling_factor = 0.0;  // 0: none
  int router_num_groups = 0;                // group-limited routing when router_group_topk > 0
  int router_group_topk = 0;
  bool router_enable_expert_bias = false;
  double router_bias_update_rate = 1e-3;
  LoadBalancing load_balancing = LoadBalancing::kAuxLoss;
  double aux_loss_coeff = 0.0;
  double z_loss_coeff = 0.0;                  // 0: none (Megatron's None)
  double expert_capacity_factor = 0.0;        // 0: dropless (Megatron's None)
  bool pad_expert_input_to_capacity = false;
  TokenDropPolicy token_drop_policy = TokenDropPolicy::kProbs;
  TokenDispatcher token_dispatcher = TokenDispatcher::kAllGather;

  bool enabled() const { return num_experts > 0; }
  // Whether layer `layer` (0-based, global) of a model of `num_layers` layers is an MoE layer.
  bool is_moe_layer(int layer) const;
  // The MoE layers among layers [0, num_layers).
  int num_moe_layers(int num_layers) const;
  // Every inconsistency, with Megatron's messages where it has one (`num_layers`: the model's, for
  // the layer pattern's length).
  std::vector<std::string> validate(int num_layers = 0) const;
  // The experts' ffn size: ffn_hidden_size, or the model's.
  int expert_ffn_hidden_size(int model_ffn_hidden_size) const {
    return ffn_hidden_size > 0 ? ffn_hidden_size : model_ffn_hidden_size;
  }
};

// --moe-layer-freq's text as Megatron's moe_freq_type reads it: an integer N (one MoE layer every N
// layers), or a Python list expression of 0s and 1s, one per layer, made of list literals, `+`
// (concatenation), `*` by an integer (repetition) and parentheses: "([0]*3+[1]*29)" (Megatron
// evaluates it with Python's eval; this reads exactly that grammar). Throws megatron::Error
// naming the flag and the position of what it cannot read.
struct MoeLayerFreq {
  int every = 1;             // the integer form
  std::vector<int> pattern;  // the list form (then `every` is unused)
};
MoeLayerFreq parse_moe_layer_freq(std::string_view text);
// The value as Megatron's argument dump prints it: "2", or "[1, 0, 1, 0]".
std::string moe_layer_freq_text(const MoeLayerFreq& freq);

}  // namespace megatron::model
