// Megatron's sampling (sample_token) against probabilities worked out by hand: a fixed
// distribution is sampled many times with a seeded generator, ids outside the kept set must never
// come up and the kept ids' frequencies must pass Pearson's chi-square test against the
// renormalised probabilities at the 1e-6 level (so a correct sampler fails for fewer than one seed
// in 10^5). Greedy generation with the key/value cache against a plain full-sequence argmax loop.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "megatron/core/check.h"
#include "megatron/interop/generation.h"
#include "megatron/parallel/single_process_context.h"
#include "model/tiny_model_config.h"
#include "test_support.h"

namespace megatron::interop {
namespace {

constexpr int kDraws = 8000;

// A distribution with distinct probabilities, sorted: 0.40 (id 1), 0.30 (id 3), 0.15 (id 4),
// 0.10 (id 2), 0.05 (id 0); cumulative 0.40, 0.70, 0.85, 0.95, 1.
const std::vector<double> kProbabilities = {0.05, 0.40, 0.10, 0.30, 0.15};

// Logits whose softmax is `p` (shifted: softmax ignores a constant).
at::Tensor logits_of(const std::vector<double>& p, const std::vector<double>& padding = {}) {
  std::vector<float> l;
  for (const double x : p) l.push_back(static_cast<float>(std::log(x) + 3.0));
  for (const double x : padding) l.push_back(static_cast<float>(x));
  return at::tensor(l, at::kFloat);
}

// p_i^(1/T), renormalised over `kept` (the other ids get 0): softmax(log p / T) restricted to them.
std::vector<double> expected(const std::vector<double>& p, const std::vector<int>& kept, double temperature = 1.0) {
  std::vector<double> q(p.size(), 0.0);
  double sum = 0.0;
  for (const int i : kept) sum += q[i] = std::pow(p[i], 1.0 / temperature);
  for (double& x : q) x /= sum;
  return q;
}

at::Generator generator(std::uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

// How often each id of logits[0, size) comes up in kDraws draws.
std::vector<std::int64_t> counts(const at::Tensor& logits, std::int64_t vocab_limit, const SamplingOptions& options,
                                 std::uint64_t seed = 17) {
  at::Generator gen = generator(seed);
  std::vector<std::int64_t> n(static_cast<std::size_t>(logits.size(0)), 0);
  for (int d = 0; d < kDraws; ++d) {
    const std::int64_t id = sample_token(logits, vocab_limit, options, gen);
    EXPECT_TRUE(id >= 0 && id < logits.size(0)) << "drew id " << id;
    if (id >= 0 && id < logits.size(0)) ++n[static_cast<std::size_t>(id)];
  }
  return n;
}

// The chi-square statistic's 1 - 1e-6 quantile for df = 1..5 degrees of freedom.
double chi_square_bound(int df) {
  static const double kBound[] = {23.93, 27.63, 30.66, 33.38, 35.89};
  return kBound[df - 1];
}

// Ids of probability 0 never drawn; the others' counts consistent with `p` (Pearson's test).
void expect_frequencies(const std::vector<std::int64_t>& n, const std::vector<double>& p, const std::string& what) {
  ASSERT_EQ(n.size(), p.size()) << what;
  double chi2 = 0.0;
  int kept = 0;
  std::string table;
  for (std::size_t i = 0; i < p.size(); ++i) {
    table += " id " + std::to_string(i) + ": " + std::to_string(n[i]) + " of expected " + std::to_string(p[i] * kDraws);
    if (p[i] == 0.0) {
      EXPECT_EQ(n[i], 0) << what << ": id " << i << " is outside the kept set but was drawn";
      continue;
    }
    const double e = p[i] * kDraws;
    chi2 += (n[i] - e) * (n[i] - e) / e;
    ++kept;
  }
  if (kept > 1) {
    EXPECT_LT(chi2, chi_square_bound(kept - 1)) << what << ":" << table;
  }
}

TEST(Sampling, GreedyReturnsTheArgmax) {
  at::Generator values = generator(3);
  for (int trial = 0; trial < 20; ++trial) {
    const at::Tensor logits = at::randn({50}, values);
    std::vector<float> v(logits.data_ptr<float>(), logits.data_ptr<float>() + 50);
    const auto argmax = std::max_element(v.begin(), v.end()) - v.begin();
    SamplingOptions o;
    o.greedy = true;
    o.temperature = 0.3;  // ignored: greedy takes the most likely token
    at::Generator gen = generator(1);
    EXPECT_EQ(sample_token(logits, 50, o, gen), argmax) << "trial " << trial;
  }
}

TEST(Sampling, GreedyNeverChoosesPaddedIds) {
  SamplingOptions o;
  o.greedy = true;
  at::Generator gen = generator(1);
  // The padding rows (ids 5..7) have the largest logits; the answer is the best real token, id 1.
  EXPECT_EQ(sample_token(logits_of(kProbabilities, {50.0, 60.0, 70.0}), 5, o, gen), 1);
}

TEST(Sampling, DrawsFollowTheSoftmaxOfTheLogits) {
  expect_frequencies(counts(logits_of(kProbabilities), 5, SamplingOptions{}), kProbabilities, "plain sampling");
}

TEST(Sampling, TemperatureSharpensOrFlattensTheDistribution) {
  for (const double t : {0.5, 2.0}) {
    SamplingOptions o;
    o.temperature = t;
    expect_frequencies(counts(logits_of(kProbabilities), 5, o), expected(kProbabilities, {0, 1, 2, 3, 4}, t),
                       "temperature " + std::to_string(t));
  }
}

TEST(Sampling, TopKDrawsOnlyTheKMostLikelyInProportion) {
  SamplingOptions o;
  o.top_k = 2;
  expect_frequencies(counts(logits_of(kProbabilities), 5, o), expected(kProbabilities, {1, 3}), "top-k 2");
  o.top_k = 3;
  o.temperature = 2.0;  // the same three, with tempered weights
  expect_frequencies(counts(logits_of(kProbabilities), 5, o), expected(kProbabilities, {1, 3, 4}, 2.0),
                     "top-k 3 at temperature 2");
}

TEST(Sampling, TopKOfOneAlwaysTakesTheMostLikely) {
  SamplingOptions o;
  o.top_k = 1;
  expect_frequencies(counts(logits_of(kProbabilities), 5, o), expected(kProbabilities, {1}), "top-k 1");
}

TEST(Sampling, TopKBeyondTheVocabularyKeepsEveryToken) {
  SamplingOptions o;
  o.top_k = 100;
  expect_frequencies(counts(logits_of(kProbabilities), 5, o), kProbabilities, "top-k 100 of 5");
}

TEST(Sampling, TopPKeepsTheSmallestSetReachingP) {
  SamplingOptions o;
  // Cumulative 0.40, 0.70, 0.85: p = 0.8 needs the three most likely, p = 0.5 the two, p = 0.3 one.
  o.top_p = 0.8;
  expect_frequencies(counts(logits_of(kProbabilities), 5, o), expected(kProbabilities, {1, 3, 4}), "top-p 0.8");
  o.top_p = 0.5;
  expect_frequencies(counts(logits_of(kProbabilities), 5, o), expected(kProbabilities, {1, 3}), "top-p 0.5");
  o.top_p = 0.3;
  expect_frequencies(counts(logits_of(kProbabilities), 5, o), expected(kProbabilities, {1}), "top-p 0.3");
}

TEST(Sampling, TopPIsTakenOverTheTemperedDistribution) {
  // At temperature 2 the weights are sqrt(p) / sum: 0.300, 0.260, 0.184, 0.150, 0.106 (ids 1, 3,
  // 4, 2, 0), cumulative 0.300, 0.560, 0.744, 0.894: p = 0.8 now keeps four tokens, not three.
  SamplingOptions o;
  o.temperature = 2.0;
  o.top_p = 0.8;
  expect_frequencies(counts(logits_of(kProbabilities), 5, o), expected(kProbabilities, {1, 3, 4, 2}, 2.0),
                     "top-p 0.8 at temperature 2");
}

TEST(Sampling, PaddedIdsAreNeverDrawn) {
  // Three padding rows with by far the largest logits: only ids below vocab_limit may come up,
  // in the proportions of the real rows alone.
  const at::Tensor logits = logits_of(kProbabilities, {20.0, 30.0, 40.0});
  std::vector<double> p = kProbabilities;
  p.resize(8, 0.0);
  expect_frequencies(counts(logits, 5, SamplingOptions{}), p, "vocab limit 5 of 8");
  SamplingOptions o;
  o.top_p = 0.5;
  p = expected(kProbabilities, {1, 3});
  p.resize(8, 0.0);
  expect_frequencies(counts(logits, 5, o), p, "vocab limit 5 of 8 with top-p 0.5");
}

TEST(Sampling, TheSameSeedDrawsTheSameTokens) {
  SamplingOptions o;
  o.temperature = 1.5;
  at::Generator a = generator(42), b = generator(42), c = generator(43);
  std::vector<std::int64_t> first, second, other;
  for (int d = 0; d < 64; ++d) {
    first.push_back(sample_token(logits_of(kProbabilities), 5, o, a));
    second.push_back(sample_token(logits_of(kProbabilities), 5, o, b));
    other.push_back(sample_token(logits_of(kProbabilities), 5, o, c));
  }
  EXPECT_EQ(first, second);
  EXPECT_NE(first, other);  // 64 draws of a 5-way distribution: equal by chance with p < 1e-15
}

TEST(Sampling, ATinyTemperatureTakesTheMostLikelyToken) {
  // Logits / 1e-300 overflow to +inf (or 0 / 0 in float): the shifted division in double keeps
  // the most likely token at 0 and sends the others to -inf.
  for (const double t : {1e-40, 1e-300}) {
    SamplingOptions o;
    o.temperature = t;
    expect_frequencies(counts(logits_of(kProbabilities), 5, o), expected(kProbabilities, {1}),
                       "temperature " + std::to_string(t));
  }
}

// Greedy generation through the key/value cache equals re-running the whole sequence each step
// and taking the argmax of the last position's logits (below the vocabulary limit).
TEST(Generation, GreedyWithTheCacheMatchesFullSequenceArgmax) {
  const model::ModelConfig config = testing::tiny_config();
  const parallel::ParameterInit init(5);
  const model::GptModel model(config, parallel::single_process_context(), init);
  const std::vector<std::int64_t> prompt = {3, 14, 15, 92, 65};
  const std::int64_t vocab_limit = 90;  // ids 90..95 are padding
  SamplingOptions o;
  o.greedy = true;
  o.max_new_tokens = 8;
  o.stop_at_eod = false;
  const std::vector<std::int64_t> got = generate(model, prompt, vocab_limit, /*eod=*/0, o);

  at::NoGradGuard no_grad;
  std::vector<std::int64_t> tokens = prompt, want;
  for (int step = 0; step < o.max_new_tokens; ++step) {
    const auto s = static_cast<std::int64_t>(tokens.size());
    const at::Tensor logits = model.forward(at::tensor(tokens, at::kLong).unsqueeze(0),
                                            at::arange(s, at::kLong).unsqueeze(0), at::Tensor(), at::Tensor(),
                                            model::ForwardContext{false});  // [1, s, V]
    const at::Tensor last = logits[0][s - 1].narrow(0, 0, vocab_limit).contiguous();
    std::vector<float> v(last.data_ptr<float>(), last.data_ptr<float>() + vocab_limit);
    want.push_back(std::max_element(v.begin(), v.end()) - v.begin());
    tokens.push_back(want.back());
  }
  EXPECT_EQ(got, want);
}

// Megatron refuses a prompt plus tokens to generate longer than the model's positions, before
// generating anything; within them, generation runs to max_new_tokens or the EOD.
TEST(Generation, StopsAfterTheEodAndRefusesMoreTokensThanPositions) {
  const model::ModelConfig config = testing::tiny_config();  // 20 learned positions
  const parallel::ParameterInit init(5);
  const model::GptModel model(config, parallel::single_process_context(), init);
  SamplingOptions o;
  o.greedy = true;
  o.max_new_tokens = 18;
  o.stop_at_eod = false;
  const std::vector<std::int64_t> prompt = {1, 2, 3};
  testing::expect_contains(testing::error_of([&] { generate(model, prompt, 96, 0, o); }),
                           {"the prompt (3 tokens) and --max-new-tokens 18 need 21 positions; the model has 20",
                            "give --max-new-tokens 17 or less"});
  testing::expect_contains(testing::error_of([&] { generate(model, std::vector<std::int64_t>(20, 1), 96, 0, o); }),
                           {"the prompt has 20 tokens; the model has 20 positions"});
  o.max_new_tokens = 17;  // the prompt's 3 positions and 17 new tokens fill the 20
  const std::vector<std::int64_t> all = generate(model, prompt, 96, 0, o);
  EXPECT_EQ(all.size(), 17u);
  // With stop_at_eod, calling the 4th generated token the EOD ends the output right after it.
  o.stop_at_eod = true;
  const std::vector<std::int64_t> stopped = generate(model, prompt, 96, all[3], o);
  const auto first = std::find(all.begin(), all.end(), all[3]) - all.begin();
  EXPECT_EQ(stopped, std::vector<std::int64_t>(all.begin(), all.begin() + first + 1));
  testing::expect_contains(testing::error_of([&] { generate(model, {}, 96, 0, o); }), {"the prompt is empty"});
}

TEST(Generation, NamesNonFiniteLogitsInsteadOfSampling) {
  const model::ModelConfig config = testing::tiny_config();
  const parallel::ParameterInit init(5);
  const model::GptModel model(config, parallel::single_process_context(), init);
  SamplingOptions sampled, greedy;
  greedy.greedy = true;
  sampled.max_new_tokens = greedy.max_new_tokens = 8;  // within the 20 positions
  at::Tensor norm;
  for (const auto& [name, t] : model.named_parameters()) {
    if (name == "decoder.final_layernorm.weight") norm = t;
  }
  ASSERT_TRUE(norm.defined());
  {
    at::NoGradGuard no_grad;
    norm[3].fill_(std::numeric_limits<float>::quiet_NaN());  // a weight a diverged run left NaN
  }
  for (const SamplingOptions& o : {sampled, greedy}) {
    testing::expect_contains(testing::error_of([&] { generate(model, {1, 2, 3}, 96, 0, o); }),
                             {"the model's logits are NaN (96 of 96) at step 1", "weights are not finite"});
  }
  {
    at::NoGradGuard no_grad;
    norm.fill_(std::numeric_limits<float>::infinity());
  }
  testing::expect_contains(testing::error_of([&] { generate(model, {1, 2, 3}, 96, 0, sampled); }),
                           {"the model's logits are", "at step 1"});
}

}  // namespace
}  // namespace megatron::interop
