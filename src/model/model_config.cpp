// ModelConfig checks and parameter count (see model_config.h).
#include "megatron/model/model_config.h"

#include "megatron/core/check.h"

namespace megatron::model {

std::vector<std::string> ModelConfig::validate() const {
  std::vector<std::string> problems;
  auto need = [&](bool ok, auto&&... parts) {
    if (!ok) problems.push_back(str_cat(parts...));
  };
  need(num_layers > 0, "--num-layers must be positive");
  need(hidden_size > 0, "--hidden-size must be positive");
  need(ffn_hidden_size > 0, "--ffn-hidden-size must be positive");
  need(num_attention_heads > 0, "--num-attention-heads must be positive");
  need(kv_channels > 0, "--kv-channels must be positive");
  need(num_query_groups > 0 && num_attention_heads % std::max(1, num_query_groups) == 0,
       "--num-attention-heads (", num_attention_heads, ") must be divisible by --num-query-groups (",
       num_query_groups, ")");
  need(seq_length > 0, "--seq-length must be positive");
  need(position_embedding != PositionEmbedding::kLearnedAbsolute || max_position_embeddings >= seq_length,
       "--max-position-embeddings (", max_position_embeddings, ") must be at least --seq-length (", seq_length, ")");
  need(position_embedding != PositionEmbedding::kRope || (rotary_dim() > 0 && rotary_dim() % 2 == 0),
       "--rotary-percent ", rotary_percent, " of --kv-channels ", kv_channels,
       " must give a positive even number of rotated channels");
  need(padded_vocab_size > 0, "the padded vocabulary size must be positive");
  need(attention_dropout >= 0 && attention_dropout < 1, "--attention-dropout must be in [0, 1)");
  need(hidden_dropout >= 0 && hidden_dropout < 1, "--hidden-dropout must be in [0, 1)");
  return problems;
}

std::int64_t ModelConfig::num_parameters() const {
  const std::int64_t h = hidden_size, bias = add_bias_linear ? 1 : 0;
  const std::int64_t norm = normalization == Normalization::kLayerNorm ? 2 * h : h;
  const std::int64_t fc1_out = swiglu ? 2 * std::int64_t{ffn_hidden_size} : ffn_hidden_size;
  const std::int64_t q = std::int64_t{num_attention_heads} * kv_channels;
  std::int64_t layer = norm + qkv_size() * h + bias * qkv_size() + q * h + bias * h;  // attention
  layer += norm + fc1_out * h + bias * fc1_out + ffn_hidden_size * h + bias * h;      // MLP
  std::int64_t total = num_layers * layer + norm + padded_vocab_size * h;
  if (position_embedding == PositionEmbedding::kLearnedAbsolute) total += std::int64_t{max_position_embeddings} * h;
  if (untie_embeddings_and_output_weights) total += padded_vocab_size * h;
  return total;
}

}  // namespace megatron::model
