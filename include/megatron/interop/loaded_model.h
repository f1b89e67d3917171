// A trained model outside training: a checkpoint of any TP x PP layout loaded into one process
// (the single-process GptModel built from the model configuration saved in the checkpoint, every
// parameter joined from the saved shards by the same resharding a resume in another layout uses),
// and the tokenizer the saved run named.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "megatron/checkpoint/checkpoint.h"
#include "megatron/checkpoint/saved_run.h"
#include "megatron/model/gpt_model.h"
#include "megatron/parallel/communicator.h"
#include "megatron/parallel/parallel_context.h"
#include "megatron/tokenizer/tokenizer.h"
#include "megatron/tokenizer/tokenizer_files.h"

namespace megatron::interop {

struct LoadedModel {
  std::string root;
  std::int64_t iteration = 0;
  checkpoint::SavedRun run;  // what the checkpoint records of the run that wrote it
  model::ModelConfig config;
  int saved_tp = 1;
  int saved_pp = 1;
  std::unique_ptr<parallel::Communicator> comm;
  std::unique_ptr<parallel::ParallelState> state;
  std::unique_ptr<parallel::ParallelContext> pc;
  std::unique_ptr<model::GptModel> model;  // single process, CPU, fp32, eval mode by the caller
  // The checkpoint's counters, scheduler and run configuration (no tensors), for a converter that
  // writes it out again.
  checkpoint::CheckpointState saved;
};

// Loads <root>'s latest checkpoint, or `iteration` (a tool's --ckpt-iteration, which the errors
// name). Throws megatron::Error naming the folder when there is no checkpoint (or none of that
// iteration, listing those there are), it is partial, or it lacks its configuration.
LoadedModel load_model(const std::string& root, std::optional<std::int64_t> iteration = std::nullopt);

// The tokenizer of a loaded run, and the options it was built from (their paths are the files read).
struct RunTokenizer {
  tokenizer::TokenizerOptions options;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  std::string source;  // for messages: "the checkpoint's copy in DIR", or the flags that name the files
};

// The tokenizer of a loaded run, of the type it was trained with: the files `given` names, else the
// copies the checkpoint carries (iter_XXXXXXX/tokenizer/), else the files the saved run named.
// Refused, naming the tokenizer the checkpoint recorded: files for another type than the run's; a
// tokenizer with more tokens than the model's vocabulary has rows; one of another size than the
// recorded tokenizer (or, when the recorded files are gone, one whose Megatron padding does not
// give the model's rows): the export would cut the vocabulary to it, generation would never draw
// the ids past it. Refused when nothing names the files.
RunTokenizer saved_run_tokenizer(const LoadedModel& loaded, const tokenizer::TokenizerChoice& given = {});

}  // namespace megatron::interop
