// A trained model outside training: a checkpoint of any TP x PP layout loaded into one process
// (the single-process GptModel built from the configuration saved in the checkpoint, every
// parameter joined from the saved shards by the same resharding a resume in another layout uses),
// and HuggingFace's two decoder families written from it.
//   - GPT2LMHeadModel: learned positions, LayerNorm, GeLU (gelu_new for Megatron's fused tanh
//     GeLU, gelu for --no-bias-gelu-fusion), multi-head attention, tied or untied output layer.
//   - LlamaForCausalLM: RoPE (rotate-half, whole head), RMSNorm, SwiGLU, any number of query
//     groups, tied or untied, with or without linear biases.
// Anything else (RoPE with LayerNorm, partial or interleaved rotary, ...) is refused, naming the
// setting. The export cuts Megatron's padded vocabulary back to the tokenizer's size.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "megatron/model/gpt_model.h"
#include "megatron/parallel/communicator.h"
#include "megatron/parallel/parallel_context.h"
#include "megatron/tokenizer/tokenizer.h"
#include "megatron/train/arguments.h"

namespace megatron::train {

struct LoadedModel {
  std::string root;
  std::int64_t iteration = 0;
  Arguments args;                  // the saved run's arguments
  model::ModelConfig config;
  int saved_tp = 1;
  int saved_pp = 1;
  std::unique_ptr<parallel::Communicator> comm;
  std::unique_ptr<parallel::ParallelState> state;
  std::unique_ptr<parallel::ParallelContext> pc;
  std::unique_ptr<model::GptModel> model;  // single process, CPU, fp32, eval mode by the caller
};

// Loads <root>'s latest checkpoint (or `iteration`). Throws megatron::Error naming the folder
// when there is no checkpoint or it lacks its configuration.
LoadedModel load_model(const std::string& root, std::optional<std::int64_t> iteration = std::nullopt);

// The GPT-2 tokenizer of a loaded run: `vocab_file` and `merge_file` when given, else the saved
// run's (both filled in, for the caller to copy or print); refused when neither names them.
std::unique_ptr<tokenizer::Tokenizer> saved_run_tokenizer(const LoadedModel& loaded, std::string& vocab_file,
                                                          std::string& merge_file);

enum class HfFamily { kGpt2, kLlama };

// Which family can hold this model; throws megatron::Error naming every setting neither can.
HfFamily hf_family_of(const model::ModelConfig& c);

struct HfExport {
  HfFamily family = HfFamily::kGpt2;
  nlohmann::ordered_json config;             // config.json
  nlohmann::ordered_json generation_config;  // generation_config.json
  std::vector<std::pair<std::string, at::Tensor>> tensors;  // HF names, fp32 (or the chosen dtype)
};

// Megatron's full (single-process) parameters under HF's names and layouts. `eod` is the
// tokenizer's end-of-document id (bos, eos and pad in the generation defaults). The embedding and
// output rows are cut to `vocab_size`, the tokenizer's own size, dropping Megatron's padding (rows
// no token id reaches), as HF's Megatron converters do; config.json says vocab_size = `vocab_size`.
HfExport to_hf(const model::ModelConfig& c, const std::vector<std::pair<std::string, at::Tensor>>& params,
               std::int64_t eod, std::int64_t vocab_size, at::ScalarType dtype = at::kFloat);

// Writes an HF model folder: config.json, generation_config.json, model.safetensors (or
// model-0000K-of-0000N.safetensors + model.safetensors.index.json past `max_shard_bytes`), and the
// GPT-2 tokenizer files (vocab.json, merges.txt, tokenizer_config.json, special_tokens_map.json).
// Everything goes into <dir>.tmp.<pid>/ first, renamed to <dir> when complete; an existing <dir> is
// refused.
void write_hf_folder(const std::string& dir, const HfExport& model, const std::string& vocab_file,
                     const std::string& merge_file, std::int64_t model_max_length, std::uint64_t max_shard_bytes);

// The other way: a HuggingFace GPT-2 or Llama folder (config.json, model.safetensors or shards with
// an index; as transformers' save_pretrained writes them) becomes a model-only checkpoint in
// <save_dir> for tensor-parallel `tp` x pipeline-parallel `pp` (iteration 0, no optimizer or RNG
// state: continue pretraining from it with --load and --finetune, or --no-load-optim
// --no-load-rng). The vocabulary is padded with zero rows to a multiple of `tp` where needed
// (Megatron's make-vocab-size-divisible-by x TP). Returns the megatron_train model flags that
// match it (the shape flags --load compares, plus dropout and init). Throws megatron::Error
// naming every HF setting that has no megatron_train equivalent.
struct HfImport {
  HfFamily family = HfFamily::kGpt2;
  std::vector<std::string> model_flags;
};
HfImport import_hf(const std::string& hf_dir, const std::string& save_dir, int tp, int pp,
                   const std::string& vocab_file, const std::string& merge_file);

// Text generation (tools/generate): Megatron's sampling (greedy; or temperature, then top-k or
// top-p, then a draw) over the model's KV cache: the prompt in one forward step, then one step
// per new token.
struct SamplingOptions {
  std::int64_t max_new_tokens = 64;
  bool greedy = false;
  double temperature = 1.0;
  std::int64_t top_k = 0;  // 0: off
  double top_p = 0.0;      // 0: off
  std::uint64_t seed = 1234;
  bool stop_at_eod = true;
};
// The next token from fp32 logits [V] (ids >= vocab_limit, the padding, are never chosen).
std::int64_t sample_token(const at::Tensor& logits, std::int64_t vocab_limit, const SamplingOptions& options,
                          at::Generator& gen);
// Continues `prompt`; `on_token` sees each new id as soon as it is chosen. Stops after
// max_new_tokens, at the EOD (included in the result) unless !stop_at_eod, or at the model's last
// position (learned position embeddings). Returns the new ids.
std::vector<std::int64_t> generate(const model::GptModel& model, const std::vector<std::int64_t>& prompt,
                                   std::int64_t vocab_limit, std::int64_t eod, const SamplingOptions& options,
                                   const std::function<void(std::int64_t)>& on_token = {});

}  // namespace megatron::train
