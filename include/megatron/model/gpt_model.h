// Megatron's GPT model for one pipeline stage and tensor-parallel rank (spec 10): the first stage
// embeds (word + learned positions, dropout), every stage runs its share of the layers, the last
// stage applies the final norm, the output layer (tied to the word embedding unless untied) and
// the per-token vocab-parallel loss. Parameter names are Megatron's local-spec state-dict keys with
// stage-local layer numbers; each tensor is this TP rank's shard (parameter_layouts() says how).
// Under sequence parallelism the activations between the regions are [s/tp, b, h]: the embedding
// scatters (or reduce-scatters) along s and the output layer all-gathers along s.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <vector>

#include "megatron/model/model_config.h"
#include "megatron/model/transformer_layer.h"
#include "megatron/parallel/parallel_context.h"
#include "megatron/parallel/tensor_parallel.h"

namespace megatron::model {

// The part of the model one pipeline chunk holds: transformer layers [first_layer, first_layer +
// num_layers) of the whole model, the embedding when it is the first virtual stage, the final
// norm, output layer and loss when it is the last (parallel::PipelineLayout says which).
struct StageSpec {
  int first_layer = 0;
  int num_layers = 0;
  bool pre_process = true;
  bool post_process = true;
};

class GptModel {
 public:
  // Initialises this rank's parameters with Megatron's distributions (N(0, std), output
  // projections N(0, std / sqrt(2L)), norms 1/0, biases 0), each drawn as its TP shard of the
  // counter-based stream of its name (parallel/parameter_init.h, layers by their global number)
  // directly on `options`' device, in its dtype (default CPU fp32): every layout starts from the
  // single-process weights, and a rank draws only what it holds. `pc` must outlive the model.
  // Throws megatron::Error listing every size not divisible by the TP size.
  GptModel(const ModelConfig& config, const parallel::ParallelContext& pc, const parallel::ParameterInit& init,
           const at::TensorOptions& options = {});
  // One pipeline chunk: the parameters of `stage`'s layers (global numbers first_layer ...) and,
  // as `stage` says, the embeddings or the final norm and output layer. With tied embeddings, a last chunk
  // that is not also the first holds output_layer.weight equal to the word embedding (Megatron's
  // copy on the last stage); both carry the shared_embedding attribute, and their gradients must
  // be summed over the embedding group each step (parallel::allreduce_shared_embedding_grads).
  GptModel(const ModelConfig& config, const parallel::ParallelContext& pc, const parallel::ParameterInit& init,
           const StageSpec& stage, const at::TensorOptions& options = {});

  // First stage: tokens / position_ids [b, s] int64. Other stages: set_input_tensor() first.
  // mask: [b or 1, 1, s, s] bool (true = masked), or undefined for plain causal attention.
  // With labels [b, s] on the last stage: the per-token loss [b, s] (fp32, equal on every TP
  // rank); without: this rank's logits [b, s, V_pad/tp]. Not the last stage: the hidden states
  // [s, b, h] ([s/tp, b, h] under sequence parallelism), also the shape set_input_tensor takes.
  at::Tensor forward(const at::Tensor& tokens, const at::Tensor& position_ids, const at::Tensor& mask,
                     const at::Tensor& labels, const ForwardContext& ctx) const;
  // Inference with a key/value cache, for a whole model in one process (first and last stage, TP
  // 1): tokens [b, s_new] continue the sequence `cache` holds (positions from cache.length());
  // returns their logits [b, s_new, V] (fp32 when the model is) and extends the cache. An empty
  // cache takes the prompt; then one token per step costs one step.
  struct KvCache {
    std::vector<at::Tensor> keys, values;  // per layer: [length, b, ng, hn]
    std::int64_t length() const { return keys.empty() || !keys[0].defined() ? 0 : keys[0].size(0); }
  };
  at::Tensor forward_cached(const at::Tensor& tokens, KvCache& cache) const;
  void set_input_tensor(const at::Tensor& hidden) { input_tensor_ = hidden; }

  // Every parameter with its Megatron name, in a fixed order.
  const NamedTensors& named_parameters() const { return parameters_.named; }
  // How each parameter of named_parameters() (same order) is laid out over TP: column-parallel
  // weights and biases, the word embedding and the output layer split along dim 0 (SwiGLU's fc1
  // with stride 2), row-parallel weights along dim 1; the rest replicated, with sequence_parallel
  // set on norms and row-parallel biases under sequence parallelism.
  const std::vector<parallel::TensorParallelLayout>& parameter_layouts() const { return parameters_.layouts; }
  // What a checkpoint holds of the model: the parameters, then the persistent buffers (the
  // routers' expert biases), with their layouts (buffers replicated).
  NamedTensors checkpoint_tensors() const;
  std::vector<parallel::TensorParallelLayout> checkpoint_layouts() const;
  // The MoE layers, in layer order (none for a dense model).
  std::vector<const MoeLayer*> moe_layers() const;
  const ModelConfig& config() const { return config_; }
  bool pre_process() const { return pre_process_; }
  bool post_process() const { return post_process_; }

 private:
  at::Tensor embed(const at::Tensor& tokens, const at::Tensor& position_ids, const ForwardContext& ctx) const;
  // The transformer layers, with full recomputation when configured (uniform: chunks of
  // recompute_num_layers layers; block: the first recompute_num_layers layers one by one).
  at::Tensor run_layers(const at::Tensor& hidden, const at::Tensor& mask, const ForwardContext& ctx) const;

  ModelConfig config_;
  const parallel::ParallelContext* pc_;
  bool sequence_parallel_;  // config.sequence_parallel and TP > 1
  bool pre_process_, post_process_;
  std::unique_ptr<parallel::VocabParallelEmbedding> word_embeddings_;
  at::Tensor position_embeddings_;  // [max_positions, h], learned_absolute only
  std::vector<TransformerLayer> layers_;
  std::unique_ptr<Norm> final_layernorm_;
  at::Tensor output_weight_;  // untied (or non-first last stage); else the word embedding
  parallel::ParameterList parameters_;
  at::Tensor input_tensor_;
};

}  // namespace megatron::model
