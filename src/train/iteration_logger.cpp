// The run's reports (see iteration_logger.h).
#include "megatron/train/iteration_logger.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>

#include "megatron/core/check.h"
#include "megatron/core/log.h"
#include "megatron/kernels/device.h"
#include "megatron/train/training_log.h"

namespace megatron::train {

IterationLogger::IterationLogger(LoggerSettings settings, std::ostream& out,
                                 std::unique_ptr<TensorBoardWriter> tensorboard)
    : settings_(std::move(settings)), out_(out), tensorboard_(std::move(tensorboard)) {}

template <typename F>
void IterationLogger::to_tensorboard(std::int64_t iteration, F&& write) {
  if (!tensorboard_) return;
  try {
    write(*tensorboard_);
  } catch (const Error& e) {
    tensorboard_.reset();
    Log(out_).warning(str_cat(e.what(), "; the TensorBoard events from iteration ", iteration,
                              " on are lost, training goes on without them"));
  }
}

void IterationLogger::start(std::int64_t iteration) {
  start_iteration_ = last_iteration_ = iteration;
  report_memory_ = settings_.device.is_cuda();
  interval_start_ = Clock::now();
}

void IterationLogger::step(const StepReport& report, const Progress& now) {
  ++iterations_;
  if (report.skipped) {
    ++skipped_;
  } else {
    loss_sum_ += report.loss;
    for (const auto& [name, value] : report.moe_losses) {
      auto it = std::find_if(moe_sums_.begin(), moe_sums_.end(), [&](const auto& e) { return e.first == name; });
      if (it == moe_sums_.end()) {
        moe_sums_.emplace_back(name, value);
      } else {
        it->second += value;
      }
    }
    ++advanced_;
  }
  last_grad_norm_ = report.grad_norm;
  last_iteration_ = now.iteration;
  if (now.iteration % settings_.tensorboard.log_interval == 0) {
    to_tensorboard(now.iteration, [&](TensorBoardWriter& w) { write_tensorboard(w, report, now); });
  }
  const bool regular = now.iteration % settings_.loop.log_interval == 0;
  if (regular || now.iteration == start_iteration_ + 1) {
    print_iteration_line(regular, now);
    if (report_memory_) print_memory(now.iteration);
  }
}

void IterationLogger::print_iteration_line(bool regular, const Progress& now) {
  const double seconds = std::chrono::duration<double>(Clock::now() - interval_start_).count();
  const double per_iteration_s = seconds / static_cast<double>(iterations_);
  const LoopPlan& loop = settings_.loop;
  IterationLogFields f;
  f.timestamp = timestamp_now();
  f.iteration = now.iteration;
  f.train_iters = loop.train_iters;
  f.consumed_samples = now.consumed_samples;
  f.elapsed_ms_per_iteration = 1000.0 * per_iteration_s;
  if (loop.log_throughput) {
    f.tflops_per_gpu = settings_.flops_per_iteration / (per_iteration_s * 1e12 * settings_.world_size);
    f.tokens_per_second_per_gpu = static_cast<double>(loop.global_batch_size) *
                                  static_cast<double>(settings_.seq_length) / per_iteration_s / settings_.world_size;
  }
  f.learning_rate = now.learning_rate;
  f.global_batch_size = loop.global_batch_size;
  // Megatron averages the losses of the advanced iterations of the interval; none: no loss shown.
  if (advanced_ > 0) {
    f.losses = {{"lm loss", loss_sum_ / static_cast<double>(advanced_)}};
    for (const auto& [name, sum] : moe_sums_) f.losses.emplace_back(name, sum / static_cast<double>(advanced_));
  }
  f.loss_scale = now.loss_scale;
  if (settings_.show_grad_norm) f.grad_norm = last_grad_norm_;
  f.skipped_iterations = skipped_;
  out_ << format_iteration_line(f) << std::endl;
  if (!regular) return;
  // Megatron writes the timers at the regular log points.
  if (settings_.tensorboard.timers) {
    to_tensorboard(now.iteration, [&](TensorBoardWriter& w) {
      w.add_scalar("iteration-time", per_iteration_s, now.iteration);
      if (f.tflops_per_gpu) w.add_scalar("throughput", *f.tflops_per_gpu, now.iteration);
    });
  }
  loss_sum_ = 0.0;
  moe_sums_.clear();
  iterations_ = advanced_ = skipped_ = 0;
  interval_start_ = Clock::now();
}

void IterationLogger::write_tensorboard(TensorBoardWriter& w, const StepReport& report, const Progress& now) {
  const TensorBoardPlan& l = settings_.tensorboard;
  const auto both = [&](const std::string& tag, double value) {
    w.add_scalar(tag, value, now.iteration);
    w.add_scalar(tag + " vs samples", value, now.consumed_samples);
  };
  both("learning-rate", now.learning_rate);
  both("batch-size", settings_.loop.global_batch_size);
  both("lm loss", report.loss);
  for (const auto& [name, value] : report.moe_losses) w.add_scalar(name, value, now.iteration);  // no "vs samples"
  for (const auto& [name, value] : report.moe_layer_losses) w.add_scalar(name, value, now.iteration);
  if (l.loss_scale) both("loss-scale", now.loss_scale);
  if (l.world_size) both("world-size", settings_.world_size);
  if (settings_.show_grad_norm) both("grad-norm", report.grad_norm);
  if (l.memory && settings_.device.is_cuda()) {
    const kernels::MemoryStats m = kernels::memory_stats(settings_.device);
    w.add_scalar("mem-reserved-bytes", static_cast<double>(m.reserved), now.iteration);
    w.add_scalar("mem-allocated-bytes", static_cast<double>(m.allocated), now.iteration);
    w.add_scalar("mem-max-allocated-bytes", static_cast<double>(m.max_allocated), now.iteration);
    w.add_scalar("mem-allocated-count", static_cast<double>(m.allocation_count), now.iteration);
  }
}

// Megatron's report_memory after the first iteration and at the first regular log point.
void IterationLogger::print_memory(std::int64_t iteration) {
  if (settings_.memory_out != nullptr) {
    const kernels::MemoryStats m = kernels::memory_stats(settings_.device);
    const double mib = 1024.0 * 1024.0;
    char line[256];
    std::snprintf(line, sizeof(line),
                  "[Rank %d] (after %lld iterations) memory (MB) | allocated: %.2f | max allocated: %.2f | "
                  "reserved: %.2f | max reserved: %.2f",
                  settings_.rank, static_cast<long long>(iteration), static_cast<double>(m.allocated) / mib,
                  static_cast<double>(m.max_allocated) / mib, static_cast<double>(m.reserved) / mib,
                  static_cast<double>(m.max_reserved) / mib);
    *settings_.memory_out << line << std::endl;
  }
  report_memory_ = iteration <= start_iteration_ + 1;
}

void IterationLogger::validation(const std::string& prefix, double loss, const Progress& now, bool during_training) {
  out_ << format_validation_block(prefix, {{"lm loss", loss}}) << std::endl;
  to_tensorboard(now.iteration, [&](TensorBoardWriter& w) {
    w.add_scalar("lm loss validation", loss, now.iteration);
    w.add_scalar("lm loss validation vs samples", loss, now.consumed_samples);
    if (settings_.tensorboard.validation_ppl) {
      const double ppl = std::exp(std::min(20.0, loss));
      w.add_scalar("lm loss validation ppl", ppl, now.iteration);
      w.add_scalar("lm loss validation ppl vs samples", ppl, now.consumed_samples);
    }
    w.flush();
  });
  if (during_training) interval_start_ = Clock::now();
}

void IterationLogger::flush() {
  to_tensorboard(last_iteration_, [](TensorBoardWriter& w) { w.flush(); });
}

}  // namespace megatron::train
