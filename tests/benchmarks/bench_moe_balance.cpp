// How evenly a mixture of experts spreads its tokens over training, with and without the
// load-balancing loss: a small GPT whose every layer is an MoE layer (8 experts, top-2) trained on
// the repository's golden corpus (GPT-2 tokens, documents concatenated, windows of s + 1 tokens in
// order) in one process, fp32 on the CPU, with the library's own model, data-parallel buffers and
// optimizer, as megatron_train would (AdamW, lr 1e-3 with 10 warm-up steps, clip 1.0). Each step
// records every layer's top-k selections per expert (before any dropping) and reports the load
// imbalance, the busiest expert's tokens over the mean (1 is perfect balance, 8 is everything on
// one expert), and the idlest expert's, averaged over layers and over the steps of each window.
// Variants: no balancing; --moe-aux-loss-coeff 1e-2 and 1e-1 (aux_loss, Megatron's default softmax
// router); a sigmoid router with the aux-loss-free expert bias at rates 1e-3 (Megatron's default)
// and 1e-2.
//   build/tests/benchmarks/bench_moe_balance [steps] [data prefix]
//   (defaults 300 steps and build/tests/data/corpus_text_document, run from the repository root)
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "megatron/data/indexed_dataset.h"
#include "megatron/model/gpt_model.h"
#include "megatron/model/moe_layer.h"
#include "megatron/optim/optimizer.h"
#include "megatron/parallel/data_parallel.h"
#include "megatron/parallel/single_process_context.h"

using namespace megatron;

namespace {

constexpr std::int64_t kSeq = 128, kBatch = 8;

struct Variant {
  const char* name;
  double aux_loss_coeff;
  double bias_update_rate;  // > 0: a sigmoid router with the aux-loss-free expert bias
};

// Every document's tokens one after another.
std::vector<std::int64_t> corpus_tokens(const std::string& prefix) {
  const data::IndexedDataset dataset(prefix);
  std::vector<std::int64_t> tokens;
  for (std::size_t i = 0; i < dataset.num_sequences(); ++i) {
    const std::vector<std::int64_t> sequence = dataset.read_sequence(i);
    tokens.insert(tokens.end(), sequence.begin(), sequence.end());
  }
  return tokens;
}

model::ModelConfig config_of(const Variant& v) {
  model::ModelConfig c;
  c.num_layers = 4;
  c.hidden_size = 128;
  c.ffn_hidden_size = 256;
  c.num_attention_heads = 4;
  c.num_query_groups = 4;
  c.kv_channels = 32;
  c.seq_length = kSeq;
  c.max_position_embeddings = kSeq;
  c.position_embedding = model::PositionEmbedding::kRope;
  c.normalization = model::Normalization::kRmsNorm;
  c.swiglu = true;
  c.add_bias_linear = false;
  c.attention_dropout = 0.0;
  c.hidden_dropout = 0.0;
  c.padded_vocab_size = 50304;  // GPT-2's 50257, padded as Megatron pads it for TP 1
  c.init_method_std = 0.02;
  c.moe.num_experts = 8;
  c.moe.router_topk = 2;
  c.moe.ffn_hidden_size = 128;
  c.moe.aux_loss_coeff = v.aux_loss_coeff;
  if (v.bias_update_rate > 0) {
    c.moe.score_function = model::RouterScore::kSigmoid;
    c.moe.router_enable_expert_bias = true;
    c.moe.router_bias_update_rate = v.bias_update_rate;
  }
  return c;
}

// Per step: the mean over layers of max / mean and min / mean of the tokens per expert.
struct Balance {
  std::vector<double> max_over_mean, min_over_mean;
  std::vector<double> loss;
  double bias_spread = 0.0;  // the expert biases' max - min at the end, mean over layers
};

Balance train(const Variant& v, const std::vector<std::int64_t>& tokens, int steps) {
  const parallel::ParallelContext& pc = parallel::single_process_context();
  const model::ModelConfig c = config_of(v);
  model::GptModel model(c, pc, parallel::ParameterInit(1234));
  parallel::DataParallelBuffers buffers(model.named_parameters(), model.parameter_layouts(), pc,
                                        parallel::DataParallelConfig{});
  optim::Optimizer optimizer(buffers, pc, optim::AdamWConfig{});
  const at::Tensor positions = at::arange(kSeq, at::kLong).unsqueeze(0).expand({kBatch, kSeq});
  Balance out;
  std::size_t next = 0;
  for (int step = 1; step <= steps; ++step) {
    std::vector<std::int64_t> window;
    for (std::int64_t b = 0; b < kBatch; ++b) {
      if (next + kSeq + 1 > tokens.size()) next = 0;
      window.insert(window.end(), tokens.begin() + static_cast<std::ptrdiff_t>(next),
                    tokens.begin() + static_cast<std::ptrdiff_t>(next + kSeq + 1));
      next += kSeq;
    }
    const at::Tensor batch = at::tensor(window, at::kLong).view({kBatch, kSeq + 1});
    buffers.zero_grad();
    const at::Tensor loss = model.forward(batch.narrow(1, 0, kSeq), positions, at::Tensor(),
                                          batch.narrow(1, 1, kSeq), model::ForwardContext{true}).mean();
    loss.backward();
    buffers.finish_grad_sync();
    std::vector<const model::Router*> routers;
    double max_ratio = 0.0, min_ratio = 0.0;
    for (const model::MoeLayer* moe : model.moe_layers()) {
      routers.push_back(&moe->router());
      const at::Tensor counts = moe->last_routing().tokens_per_expert.to(at::kDouble);
      const double mean = counts.mean().item<double>();
      max_ratio += counts.max().item<double>() / mean;
      min_ratio += counts.min().item<double>() / mean;
    }
    model::update_expert_biases(routers, pc);
    const double lr = 1e-3 * std::min(1.0, step / 10.0);
    optimizer.step(lr, 0.1, 1.0);
    const double layers = static_cast<double>(routers.size());
    out.max_over_mean.push_back(max_ratio / layers);
    out.min_over_mean.push_back(min_ratio / layers);
    out.loss.push_back(loss.item<double>());
  }
  for (const model::MoeLayer* moe : model.moe_layers()) {
    const at::Tensor bias = moe->router().expert_bias();
    if (bias.defined()) out.bias_spread += (bias.max() - bias.min()).item<double>() / c.num_layers;
  }
  return out;
}

double mean_of(const std::vector<double>& v, int begin, int end) {
  double sum = 0.0;
  for (int i = begin; i < end; ++i) sum += v[static_cast<std::size_t>(i)];
  return sum / std::max(1, end - begin);
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 300;
  const std::string prefix = argc > 2 ? argv[2] : "build/tests/data/corpus_text_document";
  const std::vector<std::int64_t> tokens = corpus_tokens(prefix);
  std::printf("corpus %s: %zu tokens; %d steps of %lld x %lld tokens; 4 MoE layers, 8 experts, top-2\n",
              prefix.c_str(), tokens.size(), steps, static_cast<long long>(kBatch), static_cast<long long>(kSeq));
  const Variant variants[] = {{"no balancing", 0.0, 0.0},
                              {"aux_loss 1e-2", 1e-2, 0.0},
                              {"aux_loss 1e-1", 1e-1, 0.0},
                              {"expert bias 1e-3 (sigmoid)", 0.0, 1e-3},
                              {"expert bias 1e-2 (sigmoid)", 0.0, 1e-2}};
  std::vector<int> ends;
  for (int e : {1, 10, 50, 100, 150, 200, 300, 500, 1000}) {
    if (e <= steps) ends.push_back(e);
  }
  if (ends.empty() || ends.back() != steps) ends.push_back(steps);
  std::printf("%-28s", "steps (window)");
  int begin = 0;
  for (int e : ends) {
    std::printf(" %12s", (std::to_string(begin + 1) + "-" + std::to_string(e)).c_str());
    begin = e;
  }
  std::printf("   lm loss (last 10)\n");
  for (const Variant& v : variants) {
    const auto start = std::chrono::steady_clock::now();
    const Balance balance = train(v, tokens, steps);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%-28s", v.name);
    begin = 0;
    for (int e : ends) {
      std::printf("  %4.2f / %4.2f", mean_of(balance.max_over_mean, begin, e), mean_of(balance.min_over_mean, begin, e));
      begin = e;
    }
    std::printf("   %.4f  (%.0f s)", mean_of(balance.loss, std::max(0, steps - 10), steps), seconds);
    if (balance.bias_spread > 0) std::printf("  bias spread %.3f", balance.bias_spread);
    std::printf("\n");
    std::fflush(stdout);
  }
  std::printf("each cell: busiest expert / mean, idlest expert / mean (tokens per expert, mean over layers and steps)\n");
  return 0;
}
