// Megatron's theoretical memory footprint (see theoretical_memory.h). The arithmetic follows
// Megatron's order of operations in double, so the printed figures are Megatron's to the digit.
#include "megatron/train/theoretical_memory.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace megatron::train {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

template <typename... Args>
std::string format(const char* fmt, Args... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

double weight_and_optimizer_bytes(const TheoreticalMemoryInputs& in, std::vector<std::string>& lines) {
  const model::ModelConfig& m = in.model;
  const double h = static_cast<double>(m.hidden_size);
  const double query_to_hidden = static_cast<double>(m.kv_channels * m.num_attention_heads) / h;
  const double gated = m.swiglu ? 1.5 : 1.0;
  const double self_attention =
      2 * h * h * ((1 + static_cast<double>(m.num_query_groups) / static_cast<double>(m.num_attention_heads)) *
                   query_to_hidden);
  // MLP and the layer's two norms (two vectors each), then attention. An MoE layer counts every
  // expert and the shared expert (Megatron's formula: no router, no expert parallelism).
  const double per_layer = 2 * h * (static_cast<double>(m.ffn_hidden_size) * gated + 2) + self_attention;
  const double moe_ffn = m.moe.enabled() ? static_cast<double>(m.moe.expert_ffn_hidden_size(m.ffn_hidden_size)) *
                                               m.moe.num_experts * gated
                                         : 0.0;
  const double per_moe_layer =
      2 * h * (moe_ffn + static_cast<double>(m.moe.shared_expert_intermediate_size) * gated + 2) + self_attention;
  const double moe_layers = m.moe.enabled() ? m.moe.num_moe_layers(m.num_layers) : 0;
  const double embedding = h * static_cast<double>(m.padded_vocab_size);
  const double embedding_layers = m.untie_embeddings_and_output_weights ? 2 * embedding : embedding;
  const double block = per_layer * (static_cast<double>(m.num_layers) - moe_layers) + per_moe_layer * moe_layers +
                       2 * h;  // + the final norm
  lines.push_back(format("Number of parameters in transformer block in billions: % .2f", block / 1e9));
  lines.push_back(format("Number of parameters in embedding layers in billions: %.2f", embedding_layers / 1e9));
  lines.push_back(format("Total number of parameters in billions: %.2f", (block + embedding_layers) / 1e9));
  // The most loaded shard: a stage's layers and the embedding (and the output layer when untied and
  // one stage holds both).
  double most_loaded = (block / in.pp + embedding) / in.tp;
  if (m.untie_embeddings_and_output_weights && in.pp == 1) most_loaded += embedding / in.tp;
  lines.push_back(format("Number of parameters in most loaded shard in billions: %.4f", most_loaded / 1e9));
  if (in.pp > 1) {
    lines.push_back(
        format("Number of parameters in other shards in billions: %.4f", block / (in.pp * in.tp) / 1e9));
  }
  const double bytes_per_parameter = in.distributed_optimizer ? 6 + 12.0 / in.dp : 18;
  return most_loaded * bytes_per_parameter;
}

// The first pipeline stage's activations with sequence parallelism and selective recomputation.
double activation_bytes(const TheoreticalMemoryInputs& in, std::vector<std::string>& lines) {
  const model::ModelConfig& m = in.model;
  const double s = static_cast<double>(m.seq_length), b = static_cast<double>(in.micro_batch_size);
  const double h = static_cast<double>(m.hidden_size);
  double bytes = (s * b * h) * (18 + (4 * (static_cast<double>(m.ffn_hidden_size) / h)));
  lines.push_back(format("Activation memory footprint per transformer layer: %.1f MB", bytes / kMiB / in.tp));
  bytes *= static_cast<double>(m.num_layers);
  bytes += 8 * s * b * in.pp;      // the embedding's input, pp micro-batches in flight
  bytes += s * b * h * in.pp;      // the embedding's dropout
  if (in.virtual_stages > 0) {
    const double penalty = 1 + (static_cast<double>(in.pp - 1) / (in.pp * in.virtual_stages));
    const auto in_flight = static_cast<long long>(std::ceil(penalty * in.pp));
    lines.push_back(format("Memory penalty from interleaved schedule: %.2f", penalty));
    lines.push_back(format("Number of in-flight microbatches: %lld", in_flight));
    bytes *= penalty;
  } else if (in.pp > 1) {
    bytes *= std::min(1.0, static_cast<double>(in.num_microbatches) / in.pp);
    lines.push_back(format("Number of in-flight microbatches: %lld",
                           static_cast<long long>(std::min<std::int64_t>(in.num_microbatches, in.pp))));
  }
  if (in.pp == 1) {  // the output layer's input and the cross entropy
    bytes += s * b * h * 4 * (1 + (static_cast<double>(m.padded_vocab_size) / h));
  }
  return bytes / in.tp;
}

}  // namespace

TheoreticalMemory theoretical_memory(const TheoreticalMemoryInputs& in) {
  TheoreticalMemory out;
  out.weight_and_optimizer_mb = weight_and_optimizer_bytes(in, out.lines) / kMiB;
  const bool formula_applies =
      in.model.sequence_parallel && in.model.recompute_granularity == model::RecomputeGranularity::kSelective;
  if (!formula_applies) {
    out.lines.push_back(format("Theoretical memory footprints: weight and optimizer=%.2f MB", out.weight_and_optimizer_mb));
    return out;
  }
  out.activation_mb = activation_bytes(in, out.lines) / kMiB;
  out.lines.push_back(format("Theoretical memory footprints: weight and optimizer=%.2f MB, activation=%.2f MB, total=%.2f MB",
                             out.weight_and_optimizer_mb, *out.activation_mb,
                             out.weight_and_optimizer_mb + *out.activation_mb));
  out.lines.emplace_back();  // Megatron's message ends in "\n", so a blank line follows
  return out;
}

}  // namespace megatron::train
