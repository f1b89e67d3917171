// Megatron's sampling and KV-cached generation (see generation.h).
#include "megatron/interop/generation.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <limits>
#include <string>

#include "megatron/core/check.h"

namespace megatron::interop {
namespace {

// Logits with a NaN or +inf (or nothing but -inf) choose no token: sampling would fail inside
// LibTorch and greedy would pick an arbitrary id. They come from weights that are not finite.
void check_finite(const at::Tensor& logits, std::int64_t vocab_limit, std::int64_t step) {
  const at::Tensor l = logits.narrow(0, 0, std::min<std::int64_t>(vocab_limit, logits.size(0)));
  const std::int64_t nan = at::isnan(l).sum().item<std::int64_t>();
  const std::int64_t inf = at::isposinf(l).sum().item<std::int64_t>();
  const bool all_minus_inf = at::isneginf(l).all().item<bool>();
  if (nan == 0 && inf == 0 && !all_minus_inf) return;
  const std::string what = nan > 0 ? str_cat("NaN (", nan, " of ", l.size(0), ")")
                           : inf > 0 ? str_cat("+inf (", inf, " of ", l.size(0), ")")
                                     : std::string("-inf for every token");
  MEGATRON_FAIL("the model's logits are ", what, " at step ", step,
                ": the checkpoint's weights are not finite (a diverged run? check its loss in the training log)");
}

}  // namespace

std::int64_t sample_token(const at::Tensor& logits, std::int64_t vocab_limit, const SamplingOptions& options,
                          at::Generator& gen) {
  at::Tensor l = logits.to(at::kFloat).narrow(0, 0, std::min<std::int64_t>(vocab_limit, logits.size(0)));
  if (options.greedy) return l.argmax().item<std::int64_t>();
  // Shifted so that the largest logit is 0 (softmax is unchanged), in double: a tiny temperature
  // then sends the others to -inf instead of the largest to +inf (or 0 / 0), whose softmax is NaN.
  l = (l.to(at::kDouble) - l.max()) / options.temperature;
  const float minus_inf = -std::numeric_limits<float>::infinity();
  if (options.top_k > 0) {
    // Megatron's modify_logits_for_top_k_filtering: everything below the k-th largest goes.
    const at::Tensor kth = std::get<0>(at::topk(l, std::min<std::int64_t>(options.top_k, l.size(0)))).select(0, -1);
    l = l.masked_fill(l < kth, minus_inf);
  } else if (options.top_p > 0.0) {
    // Megatron's top-p: the smallest set of most likely tokens whose probability reaches p.
    const auto [sorted, order] = at::sort(l, 0, /*descending=*/true);
    const at::Tensor cumulative = at::softmax(sorted, 0).cumsum(0);
    at::Tensor remove = cumulative > options.top_p;
    remove = at::cat({at::zeros({1}, remove.options()), remove.narrow(0, 0, remove.size(0) - 1)});  // keep the first past p
    l = l.index_put({order.masked_select(remove)}, at::scalar_tensor(minus_inf, l.options()));
  }
  return at::multinomial(at::softmax(l, 0), 1, false, gen).item<std::int64_t>();
}

void check_fits(const model::ModelConfig& config, std::int64_t prompt_tokens, std::int64_t max_new_tokens) {
  MEGATRON_CHECK(prompt_tokens > 0, "the prompt is empty: give some text (or the EOD token) to start from");
  if (config.position_embedding != model::PositionEmbedding::kLearnedAbsolute) return;
  const std::int64_t positions = config.max_position_embeddings;
  MEGATRON_CHECK(prompt_tokens < positions, "the prompt has ", prompt_tokens, " tokens; the model has ", positions,
                 " positions (learned position embeddings), which must hold the prompt and at least one new token");
  MEGATRON_CHECK(prompt_tokens + max_new_tokens <= positions, "the prompt (", prompt_tokens,
                 " tokens) and --max-new-tokens ", max_new_tokens, " need ", prompt_tokens + max_new_tokens,
                 " positions; the model has ", positions, " (learned position embeddings): give --max-new-tokens ",
                 positions - prompt_tokens, " or less, or a shorter prompt");
}

std::vector<std::int64_t> generate(const model::GptModel& model, const std::vector<std::int64_t>& prompt,
                                   std::int64_t vocab_limit, std::int64_t eod, const SamplingOptions& options,
                                   const std::function<void(std::int64_t)>& on_token) {
  check_fits(model.config(), static_cast<std::int64_t>(prompt.size()), options.max_new_tokens);
  at::NoGradGuard no_grad;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  model::GptModel::KvCache cache;
  at::Tensor step = at::tensor(prompt, at::kLong).unsqueeze(0);
  std::vector<std::int64_t> out;
  while (static_cast<std::int64_t>(out.size()) < options.max_new_tokens) {
    const at::Tensor logits = model.forward_cached(step, cache);  // [1, s, V]
    check_finite(logits[0][-1], vocab_limit, static_cast<std::int64_t>(out.size()) + 1);
    const std::int64_t next = sample_token(logits[0][-1], vocab_limit, options, gen);
    out.push_back(next);
    if (on_token) on_token(next);
    if (options.stop_at_eod && next == eod) break;
    step = at::full({1, 1}, next, at::kLong);
  }
  return out;
}

}  // namespace megatron::interop
