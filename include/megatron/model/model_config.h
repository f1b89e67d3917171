// The GPT model's shape and numerics, resolved (no "None"): what every module of the model reads.
// Built from the command line by the trainer; written into checkpoints; compared on load.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace megatron::model {

enum class PositionEmbedding { kLearnedAbsolute, kRope };
enum class Normalization { kLayerNorm, kRmsNorm };

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
