// What a checkpoint records of the run that wrote it (meta.json's "config", and run_config.json
// beside the tracker), typed: the model, the layer split over pipeline stages, the tokenizer and
// how its vocabulary was padded. Its JSON keeps a trained run's resolved arguments under Megatron's
// names at the top level (for people; converters write none), with the model under "model" and
// the rest under "saved_run". Checkpoints written before the typed record
// carry only the arguments (and, later, "model"): from_json reads those in one place
// (saved_run.cpp's legacy reader), so nothing else in checkpoint or interop reads a flag's name.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "megatron/model/model_config.h"
#include "megatron/parallel/pipeline_layout.h"
#include "megatron/tokenizer/tokenizer.h"

namespace megatron::checkpoint {

// The layer split: the model's layers over the pipeline stages (their count is the checkpoint's
// folders'), the first and last stages' counts when given, and the virtual chunks per stage: their
// count, or (older records, Megatron's other spelling) the layers per chunk.
struct PipelineSplit {
  int num_layers = 0;
  std::optional<int> chunks;
  std::optional<int> layers_per_chunk;
  std::optional<int> first_stage_layers, last_stage_layers;
  parallel::PipelineLayout layout(int pp) const {
    return {num_layers, pp, parallel::PipelineLayout::virtual_chunks(num_layers, pp, chunks, layers_per_chunk),
            first_stage_layers, last_stage_layers};
  }
};

// Megatron's padding of the tokenizer's vocabulary: up to a multiple of divisible_by x tp.
struct VocabPadding {
  int divisible_by = 128;
  int tp = 1;
};

struct SavedRun {
  std::optional<model::ModelConfig> model;  // none: a record that describes no model
  PipelineSplit pipeline;
  tokenizer::TokenizerOptions tokenizer;
  // Why the recorded tokenizer cannot be read (a type this build does not know); empty when it
  // can. Only what builds the tokenizer refuses it: a resume reads the model and the split alone.
  std::string tokenizer_problem;
  // How the model's rows came from the tokenizer's size; none when the size was given
  // (--padded-vocab-size) or is not known (converters' checkpoints).
  std::optional<VocabPadding> vocab_padding;
  // The vocabulary rows that are the model's own, past the tokenizer's tokens (an imported
  // HuggingFace model's vocab_size: Qwen's 151936 rows for 151665 tokens), which an export gives
  // back; none when the rows past the tokenizer are Megatron's padding.
  std::optional<std::int64_t> model_vocab_rows;
  nlohmann::json arguments = nlohmann::json::object();  // the run's resolved arguments (empty from converters)

  // The model, or throws naming `where`: "<where>: the saved run configuration describes no model".
  const model::ModelConfig& model_config(const std::string& where) const;

  nlohmann::json to_json() const;
  // Throws megatron::Error naming `where` when `config` is not an object, or its model is of the
  // wrong types.
  static SavedRun from_json(const nlohmann::json& config, const std::string& where);
  // From the `args` Megatron-LM saves in its checkpoints (the Namespace's values under their dest
  // names; padded_vocab_size is the resolved vocabulary there, padded by
  // make_vocab_size_divisible_by x tensor_model_parallel_size).
  static SavedRun from_megatron_args(const nlohmann::json& args, const std::string& where);
};

}  // namespace megatron::checkpoint
