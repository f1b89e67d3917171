// megatron_train's main job on one process: tokenizer, model, optimizer and scheduler, datasets,
// the training loop with gradient accumulation, evaluation, Megatron's console lines, and
// checkpoints that resume exactly, in any tensor x data-parallel layout (one process per rank).
#pragma once

#include <iosfwd>

#include "megatron/parallel/communicator.h"
#include "megatron/train/arguments.h"

namespace megatron::train {

struct TrainingResult {
  std::int64_t final_iteration = 0;
  std::vector<double> iteration_losses;  // the lm loss of every iteration run in this process
  std::int64_t skipped_iterations = 0;   // steps the loss scaler skipped (fp16 overflow)
  std::optional<double> final_validation_loss;
  // Why the loop stopped before --train-iters: "" (it did not), "exit-interval",
  // "exit-duration" or "signal" (--exit-signal-handler). A checkpoint was saved first with --save.
  std::string early_exit;
};

// Runs the whole job. `out` receives what Megatron prints (start-up lines, the argument dump,
// iteration and validation lines). Throws megatron::Error on configuration, data or
// checkpoint problems (before the first step wherever they can be detected).
// Collective: every rank of `comm` calls it with the same arguments; rank 0 prints the start-up
// lines, the last rank the iteration and validation lines (Megatron's print_rank_0 and
// print_rank_last), every rank writes to its own `out`.
TrainingResult run_training(const Arguments& args, parallel::Communicator& comm,
                            const std::vector<std::string>& startup_messages, std::ostream& out);
// One process (world size 1).
TrainingResult run_training(const Arguments& args, const std::vector<std::string>& startup_messages,
                            std::ostream& out);

}  // namespace megatron::train
