// One pre-LN GPT transformer layer as Megatron's local spec builds it (spec 10.1-10.4):
// x = x + dropout(attention(norm1(x)) + proj_bias); x = x + dropout(mlp(norm2(x)) + fc2_bias).
// Activations are sequence-first, [s, b, h] ([s/tp, b, h] under sequence parallelism). The norms,
// the bias-activation, RoPE and the causal softmax are the fused ops of kernels/ops.h (the second
// residual add is fused into norm2); attention runs scaled-dot-product attention or the explicit
// path (ModelConfig::attention_backend), sharded by heads and query groups over TP (each rank owns
// ng/tp whole groups); the MLP is sharded by its ffn channels. Selective recomputation covers the
// core attention; full recomputation whole layers (GptModel decides which).
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "megatron/model/model_config.h"
#include "megatron/parallel/tensor_parallel.h"

namespace megatron::model {

using parallel::NamedTensors;
using parallel::ParameterList;

// The MoE layers' auxiliary-loss values (each divided by its coefficient), per layer (the model's
// global layer index) summed over the micro-batches of a step, as detached scalars on the model's
// device: Megatron's aux-losses tracker before its reductions. A layer's value stays undefined
// until the layer computes one (dense layers, other stages' layers).
struct MoeLossSums {
  std::vector<at::Tensor> z_loss, load_balancing_loss;  // empty, or one per layer of the model
  void add(int layer, int num_layers, const at::Tensor& z, const at::Tensor& load_balancing) {
    const auto into = [&](std::vector<at::Tensor>& per_layer, const at::Tensor& value) {
      if (!value.defined()) return;
      if (per_layer.empty()) per_layer.resize(static_cast<std::size_t>(num_layers));
      at::Tensor& sum = per_layer.at(static_cast<std::size_t>(layer));
      sum = sum.defined() ? sum + value : value;
    };
    into(z_loss, z);
    into(load_balancing_loss, load_balancing);
  }
};

// Generators a forward pass draws dropout masks from (Megatron's default and model-parallel
// RNG streams), and whether it trains. Owned by the trainer; saved in checkpoints.
struct ForwardContext {
  bool training = true;
  // The default stream (equal on every TP rank): hidden and embedding dropout.
  at::Generator* dropout_gen = nullptr;
  // The model-parallel stream (seeded per TP rank): attention dropout, and hidden and embedding
  // dropout under sequence parallelism (Megatron forks its tracker there).
  at::Generator* model_parallel_gen = nullptr;

  // What the backward multiplies the MoE layers' auxiliary losses by: the main loss's own factor
  // (its loss scale over the number of micro-batches; Megatron's MoEAuxLossAutoScaler scale).
  double moe_aux_loss_scale = 1.0;
  // Where MoE layers add their auxiliary losses' values (none: not recorded).
  MoeLossSums* moe_losses = nullptr;

  // The generator of hidden / embedding dropout.
  at::Generator* hidden_gen(bool sequence_parallel) const {
    return sequence_parallel ? model_parallel_gen : dropout_gen;
  }
};

// x * bernoulli(1 - p) / (1 - p) with masks from `gen`; the identity when not training or p == 0.
at::Tensor dropout(const at::Tensor& x, double p, const ForwardContext& ctx, at::Generator* gen);

// LayerNorm or RMSNorm over the last dim; parameters replicated over TP (sequence_parallel in
// their layouts under sequence parallelism, where each rank sees only its tokens).
class Norm {
 public:
  // Over the last `size` channels (0: --hidden-size).
  Norm(const ModelConfig& config, bool sequence_parallel, const at::TensorOptions& options, std::int64_t size = 0);
  at::Tensor forward(const at::Tensor& x) const;
  // (norm(x + residual), x + residual) in one fused op.
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& x, const at::Tensor& residual) const;
  void collect(const std::string& prefix, ParameterList& out) const;

 private:
  Normalization kind_;
  double eps_;
  bool sequence_parallel_;
  at::Tensor weight_, bias_;  // bias only for LayerNorm
};

// The modules take `init` scoped to their place in the model ("decoder.layers.<global number>."
// for a layer): each parameter draws under the name collect() gives it below that prefix.
class SelfAttention {
 public:
  // The layer's options carry sequence parallelism and the parameters' device and dtype.
  SelfAttention(const ModelConfig& config, const parallel::ParameterInit& init, const parallel::ParallelContext& pc,
                const parallel::LinearOptions& options);
  // x [s, b, h] ([s/tp, b, h] under sequence parallelism); mask [b or 1, 1, s, s] bool with
  // true = masked, or undefined for causal. Returns the projection output without its bias,
  // shaped like x, and the bias (may be undefined).
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& x, const at::Tensor& mask,
                                            const ForwardContext& ctx) const;
  // Inference with a key/value cache (one process, no dropout): x [s_new, b, h] holds the tokens
  // at positions [past, past + s_new), where past = keys.size(0) (undefined keys: none yet). Their
  // keys and values are appended to `keys` / `values` ([past, b, ng, hn]); each new token attends
  // to every cached one and to the new ones up to itself.
  std::pair<at::Tensor, at::Tensor> forward_cached(const at::Tensor& x, at::Tensor& keys, at::Tensor& values) const;
  void collect(const std::string& prefix, ParameterList& out) const;

 private:
  at::Tensor apply_rotary(const at::Tensor& t, const at::Tensor& freqs) const;  // t [s, b, heads, hn]
  // softmax(q k^T / sqrt(hn) + mask) v with attention dropout, for q [s, b, np, hn] and k, v
  // [s, b, ng, hn] (this rank's heads) -> [s, b, np * hn].
  at::Tensor core_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                            const ForwardContext& ctx) const;
  at::Tensor sdpa_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const ForwardContext& ctx) const;
  at::Tensor explicit_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                                const ForwardContext& ctx) const;

  ModelConfig config_;
  int local_heads_, local_groups_;  // np / tp, ng / tp
  // Set under context parallelism (CP > 1): the sequence is this rank's two chunks, attended to
  // by the ring (parallel::context_parallel_attention), RoPE at their global positions.
  const parallel::ParallelContext* context_parallel_ = nullptr;
  parallel::ColumnParallelLinear linear_qkv_;
  parallel::RowParallelLinear linear_proj_;
  // --qk-layernorm: each head's queries and keys normalized over kv_channels before RoPE. The
  // weights are replicated over TP but each rank's gradient comes from its own heads: summed over
  // TP as a sequence-parallel norm's (Megatron's finalize_model_grads does so for q/k_layernorm).
  std::optional<Norm> q_layernorm_, k_layernorm_;
  // q [s, b, np, hn] and k [s, b, ng, hn] through the norms, when there are any.
  void normalize_qk(at::Tensor& q, at::Tensor& k) const;
};

class Mlp {
 public:
  Mlp(const ModelConfig& config, const parallel::ParameterInit& init, const parallel::ParallelContext& pc,
      const parallel::LinearOptions& options);
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& x) const;  // (output, fc2 bias)
  void collect(const std::string& prefix, ParameterList& out) const;

 private:
  bool swiglu_;
  bool fused_;  // bias_activation_fusion
  parallel::ColumnParallelLinear linear_fc1_;
  parallel::RowParallelLinear linear_fc2_;
};

// Whether scaled-dot-product attention runs for inputs on `device` (see AttentionBackend).
bool uses_sdpa(AttentionBackend backend, const at::Device& device);

class MoeLayer;

class TransformerLayer {
 public:
  // sequence_parallel: the effective setting (config.sequence_parallel and TP > 1); layer: the
  // global 0-based number, which decides whether the MLP is a mixture of experts.
  TransformerLayer(const ModelConfig& config, const parallel::ParameterInit& init, const parallel::ParallelContext& pc,
                   bool sequence_parallel, const at::TensorOptions& options, int layer = 0);
  TransformerLayer(TransformerLayer&&) noexcept;
  ~TransformerLayer();
  at::Tensor forward(const at::Tensor& x, const at::Tensor& mask, const ForwardContext& ctx) const;
  // The same layer over new tokens with this layer's key/value cache (SelfAttention::forward_cached).
  at::Tensor forward_cached(const at::Tensor& x, at::Tensor& keys, at::Tensor& values) const;
  void collect(const std::string& prefix, ParameterList& out) const;
  // The MoE layer; null for a dense layer.
  const MoeLayer* moe() const { return moe_.get(); }

 private:
  double hidden_dropout_;
  bool sequence_parallel_;
  Norm input_layernorm_;
  SelfAttention self_attention_;
  Norm pre_mlp_layernorm_;
  std::optional<Mlp> mlp_;       // a dense layer
  std::unique_ptr<MoeLayer> moe_;  // an MoE layer

  std::pair<at::Tensor, at::Tensor> mlp_forward(const at::Tensor& x, const ForwardContext& ctx) const;
};

}  // namespace megatron::model
