// Megatron's GPT model for one pipeline stage (spec 10): the first stage embeds (word + learned
// positions, dropout), every stage runs its share of the layers, the last stage applies the final
// norm, the output layer (tied to the word embedding unless untied) and the per-token loss.
// Parameter names are Megatron's local-spec state-dict keys with stage-local layer numbers.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <vector>

#include "megatron/model/model_config.h"
#include "megatron/model/transformer_layer.h"
#include "megatron/parallel/parallel_state.h"
#include "megatron/parallel/tensor_parallel.h"

namespace megatron::model {

class GptModel {
 public:
  // Initialises every parameter from `init_gen` in a fixed order (Megatron's distributions:
  // N(0, std), output projections N(0, std / sqrt(2L)), norms 1/0, biases 0).
  GptModel(const ModelConfig& config, const parallel::ParallelState& ps, at::Generator& init_gen);

  // First stage: tokens / position_ids [b, s] int64. Other stages: set_input_tensor() first.
  // mask: [b or 1, 1, s, s] bool (true = masked), or undefined for plain causal attention.
  // With labels [b, s] on the last stage: the per-token loss [b, s] (fp32); without: logits
  // [b, s, V_pad/tp]. Not the last stage: the hidden states [s, b, h].
  at::Tensor forward(const at::Tensor& tokens, const at::Tensor& position_ids, const at::Tensor& mask,
                     const at::Tensor& labels, const ForwardContext& ctx) const;
  void set_input_tensor(const at::Tensor& hidden) { input_tensor_ = hidden; }

  // Every parameter with its Megatron name, in a fixed order.
  const NamedTensors& named_parameters() const { return parameters_; }
  const ModelConfig& config() const { return config_; }
  bool pre_process() const { return pre_process_; }
  bool post_process() const { return post_process_; }

 private:
  ModelConfig config_;
  const parallel::ParallelState* ps_;
  bool pre_process_, post_process_;
  std::unique_ptr<parallel::VocabParallelEmbedding> word_embeddings_;
  at::Tensor position_embeddings_;  // [max_positions, h], learned_absolute only
  std::vector<TransformerLayer> layers_;
  std::unique_ptr<Norm> final_layernorm_;
  at::Tensor output_weight_;  // untied (or non-first last stage); else the word embedding
  NamedTensors parameters_;
  at::Tensor input_tensor_;
};

}  // namespace megatron::model
