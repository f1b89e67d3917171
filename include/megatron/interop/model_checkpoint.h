// A whole single-process model written as a model-only checkpoint for a TP x PP (x EP) layout
// (convert_checkpoint's savers): in this build's own format, each rank's shard folder under the
// names its stage gives its parameters; or as Megatron-Core's torch_dist checkpoint, whose global
// tensors any layout of Megatron's or ours reads.
#pragma once

#include <string>

#include "megatron/checkpoint/checkpoint.h"
#include "megatron/model/gpt_model.h"

namespace megatron::interop {

struct CheckpointTarget {
  int tp = 1, pp = 1, ep = 1;
  checkpoint::CheckpointFormat format = checkpoint::CheckpointFormat::kNative;
};

// `common`: the iteration, counters and the run's record (its config), and the tokenizer files the
// checkpoint carries. `save_dir` must be new or empty (write_new_checkpoint).
void write_model_checkpoint(const std::string& save_dir, const model::GptModel& model,
                            const checkpoint::CheckpointState& common, const CheckpointTarget& target);

}  // namespace megatron::interop
