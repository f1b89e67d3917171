// Megatron's validate_args and TransformerConfig checks for the mixture-of-experts flags, and the
// defaults they derive (--moe-ffn-hidden-size, --expert-tensor-parallel-size); what this build
// does not run yet is refused by name, together with every other problem. (The expert TP size's
// fit with the world and with TP is the parallel layout's check.)
#include "megatron/core/check.h"
#include "megatron/model/moe_config.h"
#include "megatron/parallel/parallel_state.h"
#include "resolve_arguments.h"

namespace megatron::train::detail {

void Resolver::moe() {
  auto& e = a_.moe;
  auto& p = a_.parallel;
  const int tp = p.tensor_model_parallel_size;
  if (e.num_experts && *e.num_experts == 0) e.num_experts.reset();  // Megatron: 0 means None
  if (!p.expert_tensor_parallel_size) p.expert_tensor_parallel_size = tp;
  if (!e.num_experts) {
    check(p.expert_model_parallel_size == 1, "num_experts must be non None to use expert model parallelism");
    return;
  }
  if (!positive("--num-experts", "num_experts", *e.num_experts)) return;
  const int experts = *e.num_experts, ep = p.expert_model_parallel_size;
  check(experts % ep == 0, "Number of experts should be a multiple of expert model parallel_size.");
  if (!e.moe_ffn_hidden_size) e.moe_ffn_hidden_size = a_.model.ffn_hidden_size;
  try {
    e.moe_layer_freq = model::moe_layer_freq_text(model::parse_moe_layer_freq(e.moe_layer_freq));
  } catch (const Error& error) {  // parse_moe_layer_freq names the flag and the position
    problem(error.what());
    return;
  }
  if (e.moe_expert_capacity_factor && *e.moe_expert_capacity_factor < 0) e.moe_expert_capacity_factor.reset();
  check(!e.moe_shared_expert_overlap || e.moe_token_dispatcher_type == "alltoall",
        "moe_shared_expert_overlap only works with alltoall token dispatcher.");
  check(!e.moe_shared_expert_intermediate_size || *e.moe_shared_expert_intermediate_size > 0,
        "moe_shared_expert_intermediate_size must be num_shared_experts * ffn_size_of_each_shared_expert, but got " +
            num(std::int64_t{e.moe_shared_expert_intermediate_size.value_or(0)}));
  check(!e.moe_shared_expert_intermediate_size || !a_.model.add_bias_linear,
        "bias is not supported in the shared experts, please set '--disable-bias-linear' instead.");
  const model::MoeConfig config = moe_config(a_);
  for (const std::string& message : config.validate(a_.model.num_layers)) problem(message);
  check(tp == 1 || p.sequence_parallel,
        "During training, performance may degrade if MoE and tensor parallelism are enabled without also enabling "
        "sequence parallelism.");
  const int etp = *p.expert_tensor_parallel_size;
  if (positive("--expert-tensor-parallel-size", "expert_tensor_parallel_size", etp)) {
    check(*e.moe_ffn_hidden_size % etp == 0, "--moe-ffn-hidden-size (" + num(std::int64_t{*e.moe_ffn_hidden_size}) +
                                                 ") must be divisible by --expert-tensor-parallel-size (" +
                                                 num(std::int64_t{etp}) + ")");
    // The experts' grid in the world (Megatron's check), and its fit with TP.
    if (parallel_ok_ && ep > 0) {
      const parallel::ParallelConfig grid{p.world_size, tp, p.pipeline_model_parallel_size, p.context_parallel_size,
                                          p.use_tp_pp_dp_mapping, ep, etp};
      for (std::string& message : grid.validate()) problem(std::move(message));
    }
  }
  unsupported(e.moe_shared_expert_overlap, "--moe-shared-expert-overlap");
  unsupported(e.moe_input_jitter_eps.has_value(), "--moe-input-jitter-eps");
  unsupported(a_.model.add_bias_linear, "--num-experts without --disable-bias-linear",
              "the experts have no biases here");
}

}  // namespace megatron::train::detail
