// The GPT model's shape and numerics, resolved (no "None"): what every module of the model reads.
// Built from the command line by the trainer; written into checkpoints; compared on load.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace megatron::model {

enum class PositionEmbedding { kLearnedAbsolute, kRope };
enum class Normalization { kLayerNorm, kRmsNorm };
// --attention-backend, Megatron's names. flash and fused run LibTorch's scaled-dot-product
// attention restricted to its FlashAttention-2 or cuDNN back end (on CPU: LibTorch's CPU kernel);
// unfused and local run the explicit path (QK^T, the scaled causal softmax op, dropout, PV); auto
// is scaled-dot-product attention with LibTorch's choice on GPU and the explicit path on CPU.
// An explicit attention mask (--reset-attention-mask) always takes the explicit path.
enum class AttentionBackend { kAuto, kFlash, kFused, kUnfused, kLocal };
// --recompute-granularity: selective recomputes the core attention (Megatron's default module
// core_attn), full whole layers, chosen by --recompute-method and --recompute-num-layers.
enum class RecomputeGranularity { kNone, kSelective, kFull };
enum class RecomputeMethod { kUniform, kBlock };

struct ModelConfig {
  int num_layers = 2;
  int hidden_size = 64;
  int ffn_hidden_size = 256;
  int num_attention_heads = 4;
  int num_query_groups = 4;  // == num_attention_heads without grouped-query attention
  int kv_channels = 16;      // head dim
  int seq_length = 32;
  int max_position_embeddings = 32;
  PositionEmbedding position_embedding = PositionEmbedding::kLearnedAbsolute;
  double rotary_base = 10000.0;
  double rotary_percent = 1.0;
  bool rotary_interleaved = false;
  Normalization normalization = Normalization::kLayerNorm;
  double norm_epsilon = 1e-5;
  bool swiglu = false;
  bool untie_embeddings_and_output_weights = false;
  bool add_bias_linear = true;
  double init_method_std = 0.02;
  double attention_dropout = 0.1;
  double hidden_dropout = 0.1;
  std::int64_t padded_vocab_size = 128;
  // --sequence-parallel: between the tensor-parallel regions activations are [s/tp, b, h]; norms
  // and hidden dropout see only this rank's tokens. Ignored at TP size 1 (as Megatron does).
  bool sequence_parallel = false;

  // How the model computes, not what it is (not compared on load).
  bool bias_activation_fusion = true;  // off: --no-bias-gelu-fusion (exact erf GeLU) / --no-bias-swiglu-fusion
  bool masked_softmax_fusion = true;   // off: --no-masked-softmax-fusion (plain ATen softmax)
  bool apply_rope_fusion = true;       // off: --no-rope-fusion (plain ATen rotation)
  AttentionBackend attention_backend = AttentionBackend::kAuto;
  RecomputeGranularity recompute_granularity = RecomputeGranularity::kNone;
  RecomputeMethod recompute_method = RecomputeMethod::kUniform;
  int recompute_num_layers = 1;

  // Every inconsistency (heads not divisible by groups, rotary dim odd, ...), one message each.
  std::vector<std::string> validate() const;
  // Rows of the fused QKV weight: (heads + 2 * groups) * kv_channels.
  int qkv_size() const { return (num_attention_heads + 2 * num_query_groups) * kv_channels; }
  // Channels of each head that RoPE rotates.
  int rotary_dim() const { return static_cast<int>(kv_channels * rotary_percent); }
  // Dense parameters of the whole model (embeddings and output layer included).
  std::int64_t num_parameters() const;
};

}  // namespace megatron::model
