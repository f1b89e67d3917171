// GptModel (see gpt_model.h).
#include "megatron/model/gpt_model.h"

#include "megatron/core/check.h"

namespace megatron::model {

GptModel::GptModel(const ModelConfig& config, const parallel::ParallelState& ps, at::Generator& gen)
    : config_(config), ps_(&ps), pre_process_(ps.is_first_stage()), post_process_(ps.is_last_stage()) {
  const auto problems = config.validate();
  if (!problems.empty()) {
    std::string message = "invalid model configuration:";
    for (const auto& p : problems) message += "\n  " + p;
    MEGATRON_FAIL(message);
  }
  MEGATRON_CHECK(config.num_layers % ps.pp() == 0, "--num-layers (", config.num_layers,
                 ") must be divisible by --pipeline-model-parallel-size (", ps.pp(), ")");
  if (pre_process_) {
    word_embeddings_ = std::make_unique<parallel::VocabParallelEmbedding>(
        config.padded_vocab_size, config.hidden_size, config.init_method_std, gen, ps);
    word_embeddings_->collect("embedding.word_embeddings.", parameters_);
    if (config.position_embedding == PositionEmbedding::kLearnedAbsolute) {
      position_embeddings_ = parallel::make_parameter({config.max_position_embeddings, config.hidden_size});
      parallel::init_normal(position_embeddings_, config.init_method_std, gen);
      parameters_.emplace_back("embedding.position_embeddings.weight", position_embeddings_);
    }
  }
  const int stage_layers = config.num_layers / ps.pp();
  layers_.reserve(static_cast<std::size_t>(stage_layers));
  for (int i = 0; i < stage_layers; ++i) {
    layers_.emplace_back(config, gen, ps);
    layers_.back().collect("decoder.layers." + std::to_string(i) + ".", parameters_);
  }
  if (post_process_) {
    final_layernorm_ = std::make_unique<Norm>(config);
    final_layernorm_->collect("decoder.final_layernorm.", parameters_);
    if (config.untie_embeddings_and_output_weights || !pre_process_) {
      MEGATRON_CHECK(config.untie_embeddings_and_output_weights || ps.pp() == 1,
                     "tied embeddings across pipeline stages need the embedding group all-reduce, "
                     "which this build does not have yet; use --untie-embeddings-and-output-weights");
      output_weight_ = parallel::make_parameter({config.padded_vocab_size / ps.tp(), config.hidden_size});
      parallel::init_normal(output_weight_, config.init_method_std, gen);
      parameters_.emplace_back("output_layer.weight", output_weight_);
    } else {
      output_weight_ = word_embeddings_->weight();
    }
  }
}

at::Tensor GptModel::forward(const at::Tensor& tokens, const at::Tensor& position_ids, const at::Tensor& mask,
                             const at::Tensor& labels, const ForwardContext& ctx) const {
  at::Tensor hidden;
  if (pre_process_) {
    at::Tensor emb = word_embeddings_->forward(tokens);  // [b, s, h]
    if (position_embeddings_.defined()) emb = emb + at::embedding(position_embeddings_, position_ids);
    hidden = dropout(emb.transpose(0, 1).contiguous(), config_.hidden_dropout, ctx, ctx.dropout_gen);  // [s, b, h]
  } else {
    MEGATRON_CHECK(input_tensor_.defined(), "internal error: stage ", ps_->pp_rank(), " has no input tensor");
    hidden = input_tensor_;
  }
  for (const auto& layer : layers_) hidden = layer.forward(hidden, mask, ctx);
  if (!post_process_) return hidden;
  hidden = final_layernorm_->forward(hidden);
  const at::Tensor logits = at::linear(parallel::copy_to_tensor_parallel_region(hidden, *ps_), output_weight_);
  if (!labels.defined()) return logits.transpose(0, 1).contiguous();  // [b, s, V]
  return parallel::vocab_parallel_cross_entropy(logits, labels.transpose(0, 1), *ps_).transpose(0, 1);
}

}  // namespace megatron::model
