// Pieces of the trainer (private to src/train): configuration mapping from the command line to
// the modules, and checkpoint state mapping.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <vector>

#include "megatron/checkpoint/checkpoint.h"
#include "megatron/data/dataset_builder.h"
#include "megatron/model/gpt_model.h"
#include "megatron/optim/param_scheduler.h"
#include "megatron/tokenizer/tokenizer.h"
#include "megatron/train/arguments.h"
#include "megatron/train/batch_reader.h"
#include "megatron/train/run_plan.h"

namespace megatron::train {

// The train, validation and test datasets of a run (Megatron's build_train_valid_test_datasets
// lines to `out`); `remove_stale`: also delete index-cache temporaries that dead runs left.
data::GptDatasets build_run_datasets(const DataPlan& data, const tokenizer::TokenizerOptions& tokenizer_options,
                                     const tokenizer::Tokenizer& tokenizer, bool remove_stale, std::ostream& out);

}  // namespace megatron::train
