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

namespace megatron::train {

model::ModelConfig to_model_config(const Arguments& args, std::int64_t padded_vocab);
optim::SchedulerConfig to_scheduler_config(const Arguments& args);
std::unique_ptr<tokenizer::Tokenizer> build_run_tokenizer(const Arguments& args);
data::GptDatasets build_run_datasets(const Arguments& args, const tokenizer::Tokenizer& tokenizer,
                                     std::ostream& out);

}  // namespace megatron::train
