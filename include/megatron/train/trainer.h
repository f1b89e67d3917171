// megatron_train's main job on one process: tokenizer, model, optimizer and scheduler, datasets,
// the training loop with gradient accumulation, evaluation, Megatron's console lines, and
// checkpoints that resume exactly. Structured for the parallel build (a ParallelState is passed
// everywhere, the model is built per pipeline stage), but runs TP = PP = DP = 1 today.
#pragma once

#include <iosfwd>

#include "megatron/train/arguments.h"

namespace megatron::train {

struct TrainingResult {
  std::int64_t final_iteration = 0;
  std::vector<double> iteration_losses;  // the lm loss of every iteration run in this process
  std::optional<double> final_validation_loss;
};

// Runs the whole job. `out` receives what Megatron prints (start-up lines, the argument dump,
// iteration and validation lines). Throws megatron::Error on configuration, data or
// checkpoint problems (before the first step wherever they can be detected).
TrainingResult run_training(const Arguments& args, const std::vector<std::string>& startup_messages,
                            std::ostream& out);

}  // namespace megatron::train
