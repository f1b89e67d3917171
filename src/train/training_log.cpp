// Megatron's log line formats (see training_log.h).
#include "megatron/train/training_log.h"

#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iterator>
#include <sstream>

namespace megatron::train {
namespace {

void append(std::string& out, const char* format, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), format, args...);
  out += buf;
}

}  // namespace

std::string format_iteration_line(const IterationLogFields& f) {
  std::string out = " [" + f.timestamp + "]";
  append(out, " iteration %8lld/%8lld |", static_cast<long long>(f.iteration), static_cast<long long>(f.train_iters));
  append(out, " consumed samples: %12lld |", static_cast<long long>(f.consumed_samples));
  if (f.skipped_samples > 0) append(out, " skipped samples: %12lld |", static_cast<long long>(f.skipped_samples));
  append(out, " elapsed time per iteration (ms): %.1f |", f.elapsed_ms_per_iteration);
  if (f.tflops_per_gpu) append(out, " throughput per GPU (TFLOP/s/GPU): %.1f |", *f.tflops_per_gpu);
  if (f.tokens_per_second_per_gpu) append(out, " tokens per second per GPU: %.1f |", *f.tokens_per_second_per_gpu);
  append(out, " learning rate: %.6E |", f.learning_rate);
  append(out, " global batch size: %5lld |", static_cast<long long>(f.global_batch_size));
  for (const auto& [key, value] : f.losses) {
    if (value >= 0) append(out, " %s: %.6E |", key.c_str(), value);
  }
  append(out, " loss scale: %.1f |", f.loss_scale);
  if (f.grad_norm) append(out, " grad norm: %.3f |", *f.grad_norm);
  append(out, " number of skipped iterations: %3lld |", static_cast<long long>(f.skipped_iterations));
  append(out, " number of nan iterations: %3lld |", static_cast<long long>(f.nan_iterations));
  return out;
}

std::string format_validation_block(const std::string& prefix,
                                    const std::vector<std::pair<std::string, double>>& losses) {
  std::string line = " validation loss at " + prefix + " | ";
  for (const auto& [key, value] : losses) {
    append(line, "%s value: %.6E | ", key.c_str(), value);
    append(line, "%s PPL: %.6E | ", key.c_str(), std::exp(std::min(20.0, value)));
  }
  const std::string dashes(line.size() + 1, '-');
  return dashes + "\n" + line + "\n" + dashes;
}

std::string timestamp_now() {
  timeval tv{};
  ::gettimeofday(&tv, nullptr);
  std::tm local{};
  ::localtime_r(&tv.tv_sec, &local);
  char buf[64];
  const std::size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &local);
  std::snprintf(buf + n, sizeof(buf) - n, ".%06ld", static_cast<long>(tv.tv_usec));
  return buf;
}

std::string format_timer_block(const std::vector<TimerRange>& timers) {
  std::string out = "(min, max) time across ranks (ms):";
  for (const TimerRange& t : timers) {
    std::string label = t.name + " ";
    if (label.size() < 48) label.append(48 - label.size(), '.');
    char values[96];
    std::snprintf(values, sizeof(values), ": (%.2f, %.2f)", t.min_ms, t.max_ms);
    out += "\n    " + label + values;
  }
  return out;
}

double seconds_since_process_start() {
  // Field 22 of /proc/self/stat is the start time in clock ticks after boot; the command name
  // (field 2, in parentheses) may hold spaces, so the fields are counted after its last ')'.
  std::ifstream stat("/proc/self/stat");
  std::ifstream uptime_file("/proc/uptime");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  double uptime = 0;
  const std::size_t close = text.rfind(')');
  if (close == std::string::npos || !(uptime_file >> uptime)) return 0.0;
  std::istringstream fields(text.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && (fields >> field); ++i) {
    if (i == 22) return std::max(0.0, uptime - std::stod(field) / static_cast<double>(::sysconf(_SC_CLK_TCK)));
  }
  return 0.0;
}

std::string format_datetime_line(const std::string& what) {
  return "[" + what + "] datetime: " + timestamp_now() + " ";
}

double flops_per_batch(const FlopsShape& s, std::int64_t batch_size) {
  const double b = static_cast<double>(batch_size), seq = static_cast<double>(s.seq_length);
  const double L = static_cast<double>(s.num_layers), h = static_cast<double>(s.hidden_size);
  const double q = static_cast<double>(s.kv_channels * s.num_attention_heads);
  const double k = static_cast<double>(s.kv_channels * s.num_query_groups);
  const double f = s.swiglu ? 3.0 : 2.0;
  const double dense_layers = L - static_cast<double>(s.moe_layers);
  const double mlp = dense_layers * static_cast<double>(s.ffn_hidden_size) +
                     static_cast<double>(s.moe_layers) *
                         static_cast<double>(s.moe_topk * s.moe_ffn_hidden_size + s.moe_shared_expert_size);
  const double per_token = h * mlp * f + L * h * (q + 2 * k) + L * q * h + h * static_cast<double>(s.padded_vocab_size);
  return 6.0 * (b * seq * per_token + b * seq * seq * L * q);
}

}  // namespace megatron::train
