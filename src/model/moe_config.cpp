// MoE configuration checks and the layer pattern (see moe_config.h).
#include "megatron/model/moe_config.h"

#include "megatron/core/check.h"

namespace megatron::model {

bool MoeConfig::is_moe_layer(int layer) const { return enabled() && layer_freq > 0 && layer % layer_freq == 0; }

int MoeConfig::num_moe_layers(int num_layers) const {
  int n = 0;
  for (int i = 0; i < num_layers; ++i) n += is_moe_layer(i) ? 1 : 0;
  return n;
}

std::vector<std::string> MoeConfig::validate() const {
  std::vector<std::string> problems;
  auto need = [&](bool ok, auto&&... parts) {
    if (!ok) problems.push_back(str_cat(parts...));
  };
  need(layer_freq > 0, "--moe-layer-freq must be positive, got ", layer_freq);
  need(router_topk > 0 && router_topk <= num_experts, "--moe-router-topk (", router_topk,
       ") must be between 1 and --num-experts (", num_experts, ")");
  need(!(router_topk == 1 && score_function == RouterScore::kSoftmax && !router_pre_softmax),
       "Please use --moe-router-pre-softmax when topk is 1.");
  if (router_group_topk > 0) {
    need(router_num_groups > 0, "When using group limited routing, moe_router_num_groups must be specified.");
    need(router_num_groups <= 0 || num_experts % router_num_groups == 0, "--num-experts (", num_experts,
         ") must be a multiple of --moe-router-num-groups (", router_num_groups, ")");
    need(router_group_topk <= router_num_groups, "--moe-router-group-topk (", router_group_topk,
         ") must not exceed --moe-router-num-groups (", router_num_groups, ")");
    need(router_topk % router_group_topk == 0, "--moe-router-topk (", router_topk,
         ") must be a multiple of --moe-router-group-topk (", router_group_topk, ")");
  }
  need(!router_enable_expert_bias || score_function == RouterScore::kSigmoid,
       "Expert bias for aux-loss-free routing only supports sigmoid score function. Please set "
       "--moe-router-score-function sigmoid for sigmoid score function.");
  need(aux_loss_coeff >= 0, "--moe-aux-loss-coeff must not be negative, got ", aux_loss_coeff);
  need(z_loss_coeff >= 0, "--moe-z-loss-coeff must not be negative, got ", z_loss_coeff);
  need(!pad_expert_input_to_capacity || expert_capacity_factor > 0,
       "--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor");
  need(ffn_hidden_size >= 0 && shared_expert_intermediate_size >= 0,
       "--moe-ffn-hidden-size and --moe-shared-expert-intermediate-size must be positive");
  return problems;
}

}  // namespace megatron::model
