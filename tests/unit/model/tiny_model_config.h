// The tiny GPT configuration the model tests share (single-process parity with plain PyTorch and
// the tensor-parallel parity under mpirun): 2 layers, hidden 48, 4 heads and groups, vocabulary 96,
// no dropout, a large init std so that every path shows in the gradients.
#pragma once

#include "megatron/model/model_config.h"

namespace megatron::testing {

inline model::ModelConfig tiny_config() {
  model::ModelConfig c;
  c.num_layers = 2;
  c.hidden_size = 48;
  c.ffn_hidden_size = 96;
  c.num_attention_heads = 4;
  c.num_query_groups = 4;
  c.kv_channels = 12;
  c.seq_length = 16;
  c.max_position_embeddings = 20;
  c.padded_vocab_size = 96;
  c.attention_dropout = 0.0;
  c.hidden_dropout = 0.0;
  c.init_method_std = 0.2;  // large enough that every path matters in the gradients
  return c;
}

}  // namespace megatron::testing
