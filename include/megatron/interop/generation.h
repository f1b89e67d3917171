// Text generation for tools/generate: Megatron's sampling over a single-process model's key/value
// cache.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "megatron/model/gpt_model.h"

namespace megatron::interop {

// Text generation (tools/generate): Megatron's sampling (greedy; or temperature, then top-k or
// top-p, then a draw) over the model's KV cache: the prompt in one forward step, then one step
// per new token.
struct SamplingOptions {
  std::int64_t max_new_tokens = 64;
  bool greedy = false;
  double temperature = 1.0;
  std::int64_t top_k = 0;  // 0: off
  double top_p = 0.0;      // 0: off
  std::uint64_t seed = 1234;
  bool stop_at_eod = true;
};
// The next token from fp32 logits [V] (ids >= vocab_limit, the padding, are never chosen).
std::int64_t sample_token(const at::Tensor& logits, std::int64_t vocab_limit, const SamplingOptions& options,
                          at::Generator& gen);
// Refuses an empty prompt and, for learned position embeddings, a prompt that with max_new_tokens
// needs more positions than the model has (Megatron's "prompt + tokens to generate" limit): the
// caller checks before it shows anything.
void check_fits(const model::ModelConfig& config, std::int64_t prompt_tokens, std::int64_t max_new_tokens);
// Continues `prompt` (check_fits first); `on_token` sees each new id as soon as it is chosen.
// Stops after max_new_tokens or at the EOD (included in the result) unless !stop_at_eod. Returns
// the new ids. Logits with a NaN or +inf (or all -inf) are refused naming the step: they come from
// weights that are not finite.
std::vector<std::int64_t> generate(const model::GptModel& model, const std::vector<std::int64_t>& prompt,
                                   std::int64_t vocab_limit, std::int64_t eod, const SamplingOptions& options,
                                   const std::function<void(std::int64_t)>& on_token = {});

}  // namespace megatron::interop
