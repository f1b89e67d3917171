// One pre-LN GPT transformer layer as Megatron's local spec builds it (spec 10.1-10.4):
// x = x + dropout(attention(norm1(x)) + proj_bias); x = x + dropout(mlp(norm2(x)) + fc2_bias).
// Activations are sequence-first, [s, b, h]. Attention is plain ATen (causal or an explicit mask).
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>

#include "megatron/model/model_config.h"
#include "megatron/parallel/tensor_parallel.h"

namespace megatron::model {

using parallel::NamedTensors;

// Generators a forward pass draws dropout masks from (Megatron's default and model-parallel
// RNG streams), and whether it trains. Owned by the trainer; saved in checkpoints.
struct ForwardContext {
  bool training = true;
  at::Generator* dropout_gen = nullptr;            // hidden / embedding dropout
  at::Generator* attention_dropout_gen = nullptr;  // inside the tensor-parallel region
};

// x * bernoulli(1 - p) / (1 - p) with masks from `gen`; the identity when not training or p == 0.
at::Tensor dropout(const at::Tensor& x, double p, const ForwardContext& ctx, at::Generator* gen);

class Norm {
 public:
  Norm(const ModelConfig& config);
  at::Tensor forward(const at::Tensor& x) const;
  void collect(const std::string& prefix, NamedTensors& out) const;

 private:
  Normalization kind_;
  double eps_;
  at::Tensor weight_, bias_;  // bias only for LayerNorm
};

class SelfAttention {
 public:
  SelfAttention(const ModelConfig& config, int num_layers, at::Generator& init_gen,
                const parallel::ParallelState& ps);
  // x [s, b, h]; mask [b or 1, 1, s, s] bool with true = masked, or undefined for causal.
  // Returns the projection output without its bias, and the bias (may be undefined).
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& x, const at::Tensor& mask,
                                            const ForwardContext& ctx) const;
  void collect(const std::string& prefix, NamedTensors& out) const;

 private:
  at::Tensor apply_rotary(const at::Tensor& t) const;  // t [s, b, heads, hn]

  ModelConfig config_;
  parallel::ColumnParallelLinear linear_qkv_;
  parallel::RowParallelLinear linear_proj_;
};

class Mlp {
 public:
  Mlp(const ModelConfig& config, int num_layers, at::Generator& init_gen, const parallel::ParallelState& ps);
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& x) const;  // (output, fc2 bias)
  void collect(const std::string& prefix, NamedTensors& out) const;

 private:
  bool swiglu_;
  parallel::ColumnParallelLinear linear_fc1_;
  parallel::RowParallelLinear linear_fc2_;
};

class TransformerLayer {
 public:
  TransformerLayer(const ModelConfig& config, at::Generator& init_gen, const parallel::ParallelState& ps);
  at::Tensor forward(const at::Tensor& x, const at::Tensor& mask, const ForwardContext& ctx) const;
  void collect(const std::string& prefix, NamedTensors& out) const;

 private:
  double hidden_dropout_;
  Norm input_layernorm_;
  SelfAttention self_attention_;
  Norm pre_mlp_layernorm_;
  Mlp mlp_;
};

}  // namespace megatron::model
