// Megatron's console lines, to the character (spec 5.1, 5.2): the per-interval training line,
// the framed validation / test block, and the TFLOP count behind --log-throughput.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace megatron::train {

struct IterationLogFields {
  std::string timestamp;             // "YYYY-MM-DD HH:MM:SS.ffffff" (local time)
  std::int64_t iteration = 0;
  std::int64_t train_iters = 0;
  std::int64_t consumed_samples = 0;
  std::int64_t skipped_samples = 0;  // printed only when > 0
  double elapsed_ms_per_iteration = 0.0;
  std::optional<double> tflops_per_gpu;   // --log-throughput
  std::optional<double> tokens_per_second_per_gpu;  // --log-throughput (our addition, after TFLOP/s)
  double learning_rate = 0.0;
  std::int64_t global_batch_size = 0;
  std::vector<std::pair<std::string, double>> losses;  // e.g. {"lm loss", 7.1}; negative ones omitted
  double loss_scale = 1.0;
  std::optional<double> grad_norm;   // shown when --clip-grad > 0
  std::int64_t skipped_iterations = 0;
  std::int64_t nan_iterations = 0;
};

// The whole line, starting with a space and ending with " |".
std::string format_iteration_line(const IterationLogFields& fields);

// " validation loss at {prefix} | lm loss value: ... | lm loss PPL: ... | " framed above and below
// by dashes (len + 1); three lines joined with '\n', no trailing newline.
std::string format_validation_block(const std::string& prefix,
                                    const std::vector<std::pair<std::string, double>>& losses);

// Now, as Megatron's log prints it: "YYYY-MM-DD HH:MM:SS.ffffff".
std::string timestamp_now();

// Megatron's timer block (--timing-log-option minmax): "(min, max) time across ranks (ms):" then
// per timer "\n    <name + ' ', padded with '.' to 48>: (<min>, <max>)" with two decimals.
struct TimerRange {
  std::string name;
  double min_ms = 0, max_ms = 0;
};
std::string format_timer_block(const std::vector<TimerRange>& timers);

// Seconds since this process started (Linux: /proc/self/stat against /proc/uptime, in clock
// ticks), the base of Megatron's "time to initialize megatron".
double seconds_since_process_start();

// Megatron's print_datetime line: "[<what>] datetime: 2026-11-24 13:09:49.123456 " (now, local).
std::string format_datetime_line(const std::string& what);

struct FlopsShape {
  std::int64_t num_layers, hidden_size, ffn_hidden_size, num_attention_heads, num_query_groups,
      kv_channels, padded_vocab_size, seq_length;
  bool swiglu;
  // Mixture of experts: how many layers are MoE layers, each token's experts (top-k), the experts'
  // and the shared expert's MLP sizes.
  std::int64_t moe_layers = 0, moe_topk = 0, moe_ffn_hidden_size = 0, moe_shared_expert_size = 0;
};
// Megatron's GPT FLOPs for one global batch of `batch_size` sequences (forward + backward); an MoE
// layer's MLP counts its top-k experts and its shared expert (the router is not counted, as in
// Megatron's transformer_flops).
double flops_per_batch(const FlopsShape& shape, std::int64_t batch_size);

}  // namespace megatron::train
