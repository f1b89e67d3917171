// What a run reports as it trains (Megatron's training_log and evaluate_and_print_results): the
// iteration line at every --log-interval and after a run's first iteration, its loss averaged
// over the interval's advanced (not skipped) iterations; TensorBoard's scalars every
// --tensorboard-log-interval; the GPU memory line at the first log points; the validation and
// test blocks. Lines go to the stream it is given: the last rank's (print_rank_last).
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>

#include "megatron/train/run_plan.h"
#include "megatron/train/tensorboard.h"
#include "megatron/train/train_state.h"

namespace megatron::train {

// The run where it stands when something is reported.
struct Progress {
  std::int64_t iteration = 0;
  std::int64_t consumed_samples = 0;
  double learning_rate = 0.0;
  double loss_scale = 1.0;
};

struct LoggerSettings {
  LoopPlan loop;
  TensorBoardPlan tensorboard;
  int world_size = 1;
  std::int64_t seq_length = 0;
  double flops_per_iteration = 0.0;  // for --log-throughput
  bool show_grad_norm = false;       // --clip-grad > 0 or mixed precision, as Megatron shows it
  // Where this rank prints Megatron's "[Rank r] (after N iterations) memory (MB) | ..." line
  // (GPU runs, DP rank 0), else null.
  std::ostream* memory_out = nullptr;
  int rank = 0;
  at::Device device = at::kCPU;
};

class IterationLogger {
 public:
  using Clock = std::chrono::steady_clock;

  // `tensorboard`: the writer on the rank that writes the event files, else null.
  IterationLogger(LoggerSettings settings, std::ostream& out, std::unique_ptr<TensorBoardWriter> tensorboard);

  // The run's first iteration is `iteration + 1`; starts the interval's clock.
  void start(std::int64_t iteration);
  // After every training step: counts it into the interval, writes its TensorBoard scalars when
  // due and prints the iteration line (and the memory line) when due.
  void step(const StepReport& report, const Progress& now);
  // A validation or test result, `prefix` as Megatron prints it ("iteration 10", "iteration 20 on
  // validation set"): its framed block and its TensorBoard scalars. The interval's clock restarts
  // after an evaluation during training (`during_training`), so its time is not in the next line.
  void validation(const std::string& prefix, double loss, const Progress& now, bool during_training);
  // Writes the TensorBoard events buffered so far (after a checkpoint: a job stopped then keeps
  // its curves; at the end of the run). Events that cannot be written (a full disk) never stop
  // training: a warning names the file and the iteration from which they are lost, and no more
  // are written.
  void flush();

 private:
  void print_iteration_line(bool regular, const Progress& now);
  void write_tensorboard(TensorBoardWriter& w, const StepReport& report, const Progress& now);
  void print_memory(std::int64_t iteration);
  // Runs `write` on the TensorBoard writer, if any; a failure gives up on TensorBoard with a warning.
  template <typename F>
  void to_tensorboard(std::int64_t iteration, F&& write);

  LoggerSettings settings_;
  std::ostream& out_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  std::int64_t start_iteration_ = 0;
  bool report_memory_ = false;
  // The interval since the last regular line.
  double loss_sum_ = 0.0;
  std::vector<std::pair<std::string, double>> moe_sums_;  // MoE auxiliary losses, in Megatron's order
  std::int64_t iterations_ = 0;
  std::int64_t advanced_ = 0;  // of which not skipped: their losses are averaged
  std::int64_t skipped_ = 0;  // Megatron's NaN count stays 0: a non-finite loss stops the run
  double last_grad_norm_ = 0.0;
  std::int64_t last_iteration_ = 0;  // of the last step reported
  Clock::time_point interval_start_;
};

}  // namespace megatron::train
