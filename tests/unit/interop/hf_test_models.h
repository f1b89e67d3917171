// The two tiny models the HuggingFace tests export and import: a GPT-2 (the shared tiny config:
// 2 layers, hidden 48, 4 heads of 12, MLP 96) and a Llama with grouped-query attention (4 heads in
// 2 groups), SwiGLU, biases and an untied output layer; and a model's full parameters, detached.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "megatron/model/gpt_model.h"
#include "megatron/parallel/single_process_context.h"
#include "model/tiny_model_config.h"

namespace megatron::testing {

// GPT-2's tokenizer size: what import_hf requires of the vocabulary (the GPT-2 BPE files).
inline constexpr std::int64_t kGpt2Tokens = 50257;

inline model::ModelConfig hf_gpt2_config() {
  model::ModelConfig c = tiny_config();
  c.padded_vocab_size = 50304;  // Megatron's padding of 50257 to a multiple of 128
  return c;
}

inline model::ModelConfig hf_llama_config() {
  model::ModelConfig c = hf_gpt2_config();
  c.position_embedding = model::PositionEmbedding::kRope;
  c.normalization = model::Normalization::kRmsNorm;
  c.swiglu = true;
  c.ffn_hidden_size = 64;
  c.num_query_groups = 2;
  c.untie_embeddings_and_output_weights = true;
  return c;
}

// Every parameter of a freshly initialised single-process model, detached (safe to edit), the 1-D
// ones (biases, norms) with noise.
inline std::vector<std::pair<std::string, at::Tensor>> full_parameters(const model::ModelConfig& c,
                                                                       std::uint64_t seed = 11) {
  const parallel::ParameterInit init(seed);
  const model::GptModel model(c, parallel::single_process_context(), init);
  std::vector<std::pair<std::string, at::Tensor>> out;
  // Biases start at 0 and norms at 1: a noise of its own on each, so that a mapping that swaps two
  // of the same shape (gate and up, two layers' norms) shows.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (const auto& [name, t] : model.named_parameters()) {
    at::Tensor value = t.detach().clone();
    if (value.dim() == 1) value.add_(at::randn(value.sizes(), gen, value.options()) * 0.1);
    out.emplace_back(name, value);
  }
  return out;
}

// The tensor called `name` in `tensors`; a test failure and an undefined tensor when absent.
inline at::Tensor named(const std::vector<std::pair<std::string, at::Tensor>>& tensors, const std::string& name) {
  for (const auto& [n, t] : tensors) {
    if (n == name) return t;
  }
  ADD_FAILURE() << "no tensor " << name;
  return {};
}

}  // namespace megatron::testing
