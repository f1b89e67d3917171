// The mixture-of-experts layer against a per-token reference written out here in float64: each
// token's router scores, its top-k experts chosen by sorting (group-limited and biased selection
// too), its probabilities, each chosen expert's MLP applied to it alone, the weighted sum, and the
// experts' capacity applied by sorting each expert's tokens. Outputs, the load-balancing and z
// losses' values, and the gradients of the input and of every parameter (the losses' gradients
// scaled as ForwardContext::moe_aux_loss_scale says) through autograd of the reference.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "megatron/core/check.h"
#include "megatron/model/gpt_model.h"
#include "megatron/model/moe_layer.h"
#include "megatron/parallel/single_process_context.h"
#include "model/tiny_model_config.h"
#include "tensor_expect.h"

namespace megatron::model {
namespace {

constexpr std::int64_t kSeq = 8, kBatch = 4;

ModelConfig moe_config(int experts, int topk) {
  ModelConfig c = testing::tiny_config();
  c.ffn_hidden_size = 64;
  c.moe.num_experts = experts;
  c.moe.router_topk = topk;
  c.moe.ffn_hidden_size = 32;
  return c;
}

// The layer's parameters by name, as float64 leaves (the reference's copies).
std::map<std::string, at::Tensor> float64_copies(const MoeLayer& layer) {
  parallel::ParameterList list;
  layer.collect("", list);
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, t] : list.named) out[name] = t.detach().to(at::kDouble).requires_grad_();
  return out;
}

// Indices of the k largest values, largest first.
std::vector<std::int64_t> largest(const std::vector<double>& v, std::int64_t k) {
  std::vector<std::int64_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](auto a, auto b) { return v[a] > v[b]; });
  idx.resize(static_cast<std::size_t>(k));
  return idx;
}

std::vector<double> values(const at::Tensor& t) {
  const at::Tensor c = t.detach().to(at::kDouble).contiguous();
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}

// The experts a token's selection scores choose: top-k, within the best groups when group-limited.
std::vector<std::int64_t> choose(std::vector<double> scores, const MoeConfig& moe) {
  if (moe.router_group_topk > 0) {
    const std::int64_t per_group = moe.num_experts / moe.router_num_groups;
    std::vector<double> group_score(static_cast<std::size_t>(moe.router_num_groups));
    for (int g = 0; g < moe.router_num_groups; ++g) {
      const std::vector<double> in_group(scores.begin() + g * per_group, scores.begin() + (g + 1) * per_group);
      for (std::int64_t i : largest(in_group, moe.router_topk / moe.router_group_topk)) group_score[g] += in_group[i];
    }
    const std::vector<std::int64_t> groups = largest(group_score, moe.router_group_topk);
    for (std::int64_t e = 0; e < moe.num_experts; ++e) {
      if (std::find(groups.begin(), groups.end(), e / per_group) == groups.end()) scores[e] = -1e300;
    }
  }
  return largest(scores, moe.router_topk);
}

struct Reference {
  at::Tensor out;                   // [s, b, h]
  double load_balancing = 0, z = 0;  // divided by their coefficients
  at::Tensor total_loss;            // what the backward differentiates
};

// The whole layer, token by token, in float64.
Reference reference(const ModelConfig& c, std::map<std::string, at::Tensor>& p, const at::Tensor& x64,
                    const at::Tensor& expert_bias, const at::Tensor& dout, double aux_scale) {
  const MoeConfig& moe = c.moe;
  const std::int64_t tokens = kSeq * kBatch, experts = moe.num_experts, k = moe.router_topk;
  const at::Tensor x = x64.reshape({tokens, -1});
  const at::Tensor logits = at::matmul(x, p.at("router.weight").t());  // [T, E]
  // (token, expert) -> probability, for the chosen pairs.
  std::vector<std::map<std::int64_t, at::Tensor>> chosen(static_cast<std::size_t>(tokens));
  std::vector<double> count(static_cast<std::size_t>(experts), 0.0);
  for (std::int64_t t = 0; t < tokens; ++t) {
    const at::Tensor row = logits[t];
    at::Tensor probs;
    std::vector<std::int64_t> picked;
    if (moe.score_function == RouterScore::kSigmoid) {
      const at::Tensor scores = at::sigmoid(row);
      picked = choose(values(expert_bias.defined() ? scores + expert_bias.to(at::kDouble) : scores), moe);
      probs = scores.index_select(0, at::tensor(picked));
      if (k > 1) probs = probs / probs.sum();
    } else if (moe.router_pre_softmax) {
      picked = choose(values(at::softmax(row, 0)), moe);
      probs = at::softmax(row, 0).index_select(0, at::tensor(picked));
    } else {
      picked = choose(values(row), moe);
      probs = at::softmax(row.index_select(0, at::tensor(picked)), 0);
    }
    if (moe.router_topk_scaling_factor > 0) probs = probs * moe.router_topk_scaling_factor;
    for (std::int64_t i = 0; i < k; ++i) {
      chosen[t][picked[i]] = probs[i];
      count[picked[i]] += 1;
    }
  }
  if (moe.expert_capacity_factor > 0) {  // each expert keeps its `capacity` best (or earliest) tokens
    const auto capacity = static_cast<std::int64_t>(std::ceil(double(tokens * k) / experts * moe.expert_capacity_factor));
    for (std::int64_t e = 0; e < experts; ++e) {
      std::vector<std::int64_t> routed;
      for (std::int64_t t = 0; t < tokens; ++t) {
        if (chosen[t].count(e)) routed.push_back(t);
      }
      if (moe.token_drop_policy == TokenDropPolicy::kProbs) {
        std::stable_sort(routed.begin(), routed.end(), [&](std::int64_t a, std::int64_t b) {
          return chosen[a].at(e).template item<double>() > chosen[b].at(e).template item<double>();
        });
      }
      for (std::size_t i = static_cast<std::size_t>(capacity); i < routed.size(); ++i) chosen[routed[i]].erase(e);
    }
  }
  const auto expert_mlp = [&](std::int64_t e, const at::Tensor& token) {
    const at::Tensor h = at::matmul(p.at("experts.linear_fc1.weight")[e], token);
    const at::Tensor a = c.swiglu ? at::silu(h.chunk(2)[0]) * h.chunk(2)[1] : at::gelu(h);
    return at::matmul(p.at("experts.linear_fc2.weight")[e], a);
  };
  std::vector<at::Tensor> rows;
  for (std::int64_t t = 0; t < tokens; ++t) {
    at::Tensor y = at::zeros({c.hidden_size}, at::kDouble);
    for (const auto& [e, prob] : chosen[t]) y = y + prob * expert_mlp(e, x[t]);
    if (moe.shared_expert_intermediate_size > 0) {
      const at::Tensor h = at::matmul(p.at("shared_experts.linear_fc1.weight"), x[t]);
      const at::Tensor a = c.swiglu ? at::silu(h.chunk(2)[0]) * h.chunk(2)[1] : at::gelu(h, "tanh");
      y = y + at::matmul(p.at("shared_experts.linear_fc2.weight"), a);
    }
    rows.push_back(y);
  }
  Reference r;
  r.out = at::stack(rows).view({kSeq, kBatch, -1});
  r.total_loss = (r.out * dout).sum();
  if (moe.aux_loss_coeff > 0) {
    const at::Tensor scores = at::softmax(logits, -1);
    at::Tensor loss;
    if (moe.load_balancing == LoadBalancing::kAuxLoss) {
      loss = (scores.sum(0) * at::tensor(count, at::kDouble)).sum() * (double(experts) / (double(k) * tokens * tokens));
    } else {  // per sequence b: sum_e (its tokens on e / (S k / E)) x (its mean score of e), then the mean over b
      loss = at::zeros({}, at::kDouble);
      for (std::int64_t b = 0; b < kBatch; ++b) {
        for (std::int64_t e = 0; e < experts; ++e) {
          double on_e = 0;
          at::Tensor mean_score = at::zeros({}, at::kDouble);
          for (std::int64_t s = 0; s < kSeq; ++s) {
            on_e += chosen[s * kBatch + b].count(e) ? 1 : 0;  // dropless in this case
            mean_score = mean_score + scores[s * kBatch + b][e] / double(kSeq);
          }
          loss = loss + on_e / (double(kSeq * k) / experts) * mean_score / double(kBatch);
        }
      }
    }
    r.load_balancing = loss.item<double>();
    r.total_loss = r.total_loss + loss * moe.aux_loss_coeff * aux_scale;
  }
  if (moe.z_loss_coeff > 0) {
    const at::Tensor z = at::logsumexp(logits, -1).square().mean();
    r.z = z.item<double>();
    r.total_loss = r.total_loss + z * moe.z_loss_coeff * aux_scale;
  }
  return r;
}

void check_layer(const ModelConfig& c, const std::string& what, const std::vector<double>& bias = {}) {
  SCOPED_TRACE(what);
  ASSERT_TRUE(c.validate().empty()) << c.validate()[0];
  const MoeLayer layer(c, parallel::ParameterInit(7).scope("decoder.layers.0.mlp."), parallel::single_process_context(),
                       parallel::LinearOptions{.bias = false});
  at::Tensor expert_bias;
  if (!bias.empty()) {
    expert_bias = at::tensor(bias, at::kFloat);
    layer.router().expert_bias().copy_(expert_bias);
  }
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const at::Tensor x64 = at::randn({kSeq, kBatch, c.hidden_size}, gen, at::kDouble);
  const at::Tensor dout = at::randn({kSeq, kBatch, c.hidden_size}, gen, at::kDouble);
  ForwardContext ctx{true};
  ctx.moe_aux_loss_scale = 0.5;
  const at::Tensor x = x64.to(at::kFloat).requires_grad_();
  const auto [out, bias_out] = layer.forward(x, ctx);
  EXPECT_FALSE(bias_out.defined());
  out.backward(dout.to(at::kFloat));

  std::map<std::string, at::Tensor> p = float64_copies(layer);
  const at::Tensor xr = x64.clone().requires_grad_();
  const Reference ref = reference(c, p, xr, expert_bias, dout, ctx.moe_aux_loss_scale);
  ref.total_loss.backward();
  const auto tol = testing::Tolerance::of_largest(1e-5, 1e-5);
  testing::expect_close(out, ref.out, tol, "output");
  testing::expect_close(x.grad(), xr.grad(), tol, "input gradient");
  parallel::ParameterList list;
  layer.collect("", list);
  for (const auto& [name, t] : list.named) testing::expect_close(t.grad(), p.at(name).grad(), tol, name + " gradient");
  const Routing& r = layer.last_routing();
  if (c.moe.aux_loss_coeff > 0) {
    ASSERT_TRUE(r.load_balancing_loss.defined());
    EXPECT_NEAR(r.load_balancing_loss.item<double>(), ref.load_balancing, 1e-5 * ref.load_balancing);
  }
  if (c.moe.z_loss_coeff > 0) {
    ASSERT_TRUE(r.z_loss.defined());
    EXPECT_NEAR(r.z_loss.item<double>(), ref.z, 1e-5 * ref.z);
  }
}

TEST(MoeLayer, SoftmaxTop2SwigluWithAuxAndZLossMatchesPerTokenReference) {
  ModelConfig c = moe_config(4, 2);
  c.swiglu = true;
  c.moe.aux_loss_coeff = 1e-2;
  c.moe.z_loss_coeff = 1e-3;
  check_layer(c, "softmax top-2");
}

TEST(MoeLayer, PreSoftmaxGeluSharedExpertSeqAuxLoss) {
  ModelConfig c = moe_config(6, 2);
  c.moe.router_pre_softmax = true;
  c.moe.shared_expert_intermediate_size = 40;
  c.moe.load_balancing = LoadBalancing::kSeqAuxLoss;
  c.moe.aux_loss_coeff = 1e-1;
  check_layer(c, "pre-softmax, shared expert, seq_aux_loss");
}

TEST(MoeLayer, SigmoidGroupLimitedBiasedScaled) {
  ModelConfig c = moe_config(8, 4);
  c.moe.score_function = RouterScore::kSigmoid;
  c.moe.router_num_groups = 4;
  c.moe.router_group_topk = 2;
  c.moe.router_enable_expert_bias = true;
  c.moe.router_topk_scaling_factor = 2.5;
  check_layer(c, "sigmoid, 2 of 4 groups, expert bias, scaling", {0.3, -0.2, 0.0, 0.5, -0.4, 0.1, 0.2, -0.1});
}

// Aux-loss-free balancing: the tokens routed in training passes with gradients (not a no-grad
// pass: a recomputed layer's first) move each bias by the rate toward the mean count.
TEST(MoeLayer, ExpertBiasMovesTowardTheMeanCountAfterEachStep) {
  ModelConfig c = moe_config(8, 2);
  c.moe.score_function = RouterScore::kSigmoid;
  c.moe.router_enable_expert_bias = true;
  c.moe.router_bias_update_rate = 0.125;
  const MoeLayer layer(c, parallel::ParameterInit(7).scope("decoder.layers.0.mlp."), parallel::single_process_context(),
                       parallel::LinearOptions{.bias = false});
  const std::vector<double> start = {0.25, -0.5, 0.0, 0.0, 0.125, 0.0, -0.25, 0.0};
  layer.router().expert_bias().copy_(at::tensor(start, at::kFloat));
  parallel::ParameterList list;
  layer.collect("", list);
  ASSERT_EQ(list.buffers.size(), 1u);
  EXPECT_EQ(list.buffers[0].first, "router.expert_bias");
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(11);
  std::vector<double> counts(8, 0.0);
  const ForwardContext ctx{true};
  for (int pass = 0; pass < 3; ++pass) {
    const at::Tensor x = at::randn({kSeq, kBatch, c.hidden_size}, gen);
    if (pass == 1) {
      const at::NoGradGuard no_grad;  // not counted
      layer.forward(x, ctx);
      continue;
    }
    layer.forward(x, ctx);
    const at::Tensor map = layer.last_routing().routing_map;
    for (std::int64_t t = 0; t < map.size(0); ++t) {
      for (std::int64_t e = 0; e < 8; ++e) counts[e] += map[t][e].item<bool>() ? 1.0 : 0.0;
    }
  }
  model::update_expert_biases({&layer.router()}, parallel::single_process_context());
  const double mean = std::accumulate(counts.begin(), counts.end(), 0.0) / 8;
  EXPECT_EQ(mean, 2.0 * kSeq * kBatch * 2 / 8);  // two counted passes, top-2
  for (std::int64_t e = 0; e < 8; ++e) {
    const double sign = counts[e] < mean ? 1.0 : counts[e] > mean ? -1.0 : 0.0;
    EXPECT_EQ(layer.router().expert_bias()[e].item<float>(), static_cast<float>(start[e] + 0.125 * sign))
        << "expert " << e << ": " << counts[e] << " tokens, mean " << mean;
  }
  EXPECT_EQ(layer.router().tokens_since_update().sum().item<float>(), 0.0f);
}

TEST(MoeLayer, CapacityDropsEachExpertsLeastProbableOrLatestTokens) {
  ModelConfig c = moe_config(4, 2);
  c.swiglu = true;
  c.moe.expert_capacity_factor = 0.5;  // 8 of 16 selections per expert
  check_layer(c, "capacity, probs policy");
  c.moe.token_drop_policy = TokenDropPolicy::kPosition;
  check_layer(c, "capacity, position policy");
}

TEST(MoeLayer, UnalignedSizesRunOneProductPerExpert) {
  ModelConfig c = moe_config(3, 2);
  c.moe.ffn_hidden_size = 30;  // rows of 120 bytes: not LibTorch's grouped-GEMM alignment
  check_layer(c, "ffn 30");
}

// A GPT whose layers 0 and 2 of 4 are MoE layers, under Megatron's names, counted as
// ModelConfig::num_parameters counts it.
TEST(MoeLayer, GptModelHoldsMoeLayersByLayerFreqWithMegatronNames) {
  ModelConfig c = moe_config(4, 2);
  c.num_layers = 4;
  c.moe.layer_freq = 2;
  c.swiglu = true;
  c.add_bias_linear = false;
  c.moe.shared_expert_intermediate_size = 40;
  const GptModel model(c, parallel::single_process_context(), parallel::ParameterInit(1));
  std::int64_t count = 0;
  std::map<std::string, std::vector<std::int64_t>> shapes;
  for (const auto& [name, t] : model.named_parameters()) {
    count += t.numel();
    shapes[name] = t.sizes().vec();
  }
  EXPECT_EQ(count, c.num_parameters());
  EXPECT_EQ(shapes.at("decoder.layers.0.mlp.router.weight"), (std::vector<std::int64_t>{4, 48}));
  EXPECT_EQ(shapes.at("decoder.layers.2.mlp.experts.linear_fc1.weight"), (std::vector<std::int64_t>{4, 64, 48}));
  EXPECT_EQ(shapes.at("decoder.layers.2.mlp.experts.linear_fc2.weight"), (std::vector<std::int64_t>{4, 48, 32}));
  EXPECT_EQ(shapes.at("decoder.layers.0.mlp.shared_experts.linear_fc1.weight"), (std::vector<std::int64_t>{80, 48}));
  EXPECT_EQ(shapes.at("decoder.layers.1.mlp.linear_fc1.weight"), (std::vector<std::int64_t>{128, 48}));  // dense
  EXPECT_EQ(shapes.count("decoder.layers.1.mlp.router.weight"), 0u);
}

TEST(MoeConfig, RefusesWhatMegatronRefuses) {
  ModelConfig c = moe_config(4, 1);
  EXPECT_EQ(c.validate().at(0), "Please use --moe-router-pre-softmax when topk is 1.");
  c.moe.router_pre_softmax = true;
  c.moe.router_enable_expert_bias = true;
  EXPECT_NE(c.validate().at(0).find("Expert bias for aux-loss-free routing only supports sigmoid"), std::string::npos);
  c = moe_config(6, 2);
  c.moe.router_group_topk = 2;
  EXPECT_EQ(c.validate().at(0), "When using group limited routing, moe_router_num_groups must be specified.");
  EXPECT_TRUE(moe_config(4, 2).validate().empty());
  EXPECT_EQ(moe_config(4, 2).moe.num_moe_layers(4), 4);
  ModelConfig every_other = moe_config(4, 2);
  every_other.moe.layer_freq = 2;
  EXPECT_TRUE(every_other.moe.is_moe_layer(2));
  EXPECT_FALSE(every_other.moe.is_moe_layer(1));
  // JSON under Megatron's argument names, and back.
  const ModelConfig back = ModelConfig::from_json(every_other.to_json());
  EXPECT_EQ(back.moe.num_experts, 4);
  EXPECT_EQ(back.moe.layer_freq, 2);
  EXPECT_EQ(every_other.to_json().at("moe_router_load_balancing_type"), "aux_loss");
}

// Megatron's moe_freq_type evaluates the list form with Python: the expected lists are what
// Python gives for its documented examples and a few more.
TEST(MoeConfig, LayerFreqListExpressionsAsPythonEvaluatesThem) {
  using V = std::vector<int>;
  EXPECT_EQ(parse_moe_layer_freq("([1]*3+[0]*1)*3").pattern, (V{1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0}));
  EXPECT_EQ(parse_moe_layer_freq("([0]+[1]*23)").pattern.size(), 24u);
  EXPECT_EQ(parse_moe_layer_freq("([0]+[1]*23)").pattern[0], 0);
  EXPECT_EQ(parse_moe_layer_freq("([1]*3+[0]*2)*2").pattern, (V{1, 1, 1, 0, 0, 1, 1, 1, 0, 0}));
  EXPECT_EQ(parse_moe_layer_freq(" 2 * [0, 1, ] ").pattern, (V{0, 1, 0, 1}));
  EXPECT_EQ(parse_moe_layer_freq("[1,0]*2*2").pattern, (V{1, 0, 1, 0, 1, 0, 1, 0}));
  EXPECT_EQ(parse_moe_layer_freq("[0]*0+[1]").pattern, (V{1}));
  EXPECT_EQ(parse_moe_layer_freq("3").every, 3);
  EXPECT_TRUE(parse_moe_layer_freq("3").pattern.empty());
  EXPECT_EQ(moe_layer_freq_text(parse_moe_layer_freq("([1]*2+[0])")), "[1, 1, 0]");
  for (const char* bad : {"([1]*3", "[1]*", "[1] - [0]", "two", "[1]+", "1.5"}) {
    try {
      parse_moe_layer_freq(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--moe-layer-freq"), std::string::npos) << e.what();
    }
  }
  // A pattern decides per layer; its length must be the model's and its values 0 or 1.
  ModelConfig c = moe_config(4, 2);
  c.num_layers = 4;
  c.moe.layer_pattern = {0, 1, 1, 0};
  EXPECT_TRUE(c.validate().empty());
  EXPECT_FALSE(c.moe.is_moe_layer(0));
  EXPECT_TRUE(c.moe.is_moe_layer(2));
  EXPECT_EQ(c.moe.num_moe_layers(4), 2);
  const ModelConfig back = ModelConfig::from_json(c.to_json());
  EXPECT_EQ(back.moe.layer_pattern, (V{0, 1, 1, 0}));
  EXPECT_EQ(c.to_json().at("moe_layer_freq"), nlohmann::json::parse("[0, 1, 1, 0]"));
  c.moe.layer_pattern = {0, 1, 1};
  EXPECT_EQ(c.validate().at(0), "Invalid length of moe_layer_pattern: 3, expected 4, current moe layer pattern: [0, 1, 1]");
  c.moe.layer_pattern = {0, 1, 2, 1};
  EXPECT_NE(c.validate().at(0).find("Invalid layer pattern: [0, 1, 2, 1]"), std::string::npos);
}

}  // namespace
}  // namespace megatron::model
