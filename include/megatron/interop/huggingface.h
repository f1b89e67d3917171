// HuggingFace's decoder families, written from and read into Megatron's parameters.
//   - GPT2LMHeadModel: learned positions, LayerNorm, GeLU (gelu_new for Megatron's fused tanh
//     GeLU, gelu for --no-bias-gelu-fusion), multi-head attention, tied or untied output layer.
//   - LlamaForCausalLM: RoPE (rotate-half, whole head), RMSNorm, SwiGLU, any number of query
//     groups, tied or untied, with or without linear biases.
//   - MixtralForCausalLM: Llama's attention with a mixture of experts in every layer (SwiGLU
//     experts, softmax router whose top-k probabilities are renormalised: Megatron's default
//     routing, without --moe-router-pre-softmax), no shared expert, no biases, dropless. The
//     experts are written as the hub's checkpoints hold them (block_sparse_moe.experts.<j>.w1/w2/w3).
//   - Qwen3ForCausalLM: Llama without biases and with --qk-layernorm (q_norm / k_norm: each head's
//     queries and keys RMS-normalised before RoPE), any head size.
//   - Qwen3MoeForCausalLM: Qwen3's attention with experts in the layers --moe-layer-freq picks
//     (the others dense: config.json's mlp_only_layers), the top-k probabilities renormalised
//     (norm_topk_prob) or, with --moe-router-pre-softmax, not; the hub's per-expert tensors
//     (mlp.experts.<j>.gate_proj/up_proj/down_proj). The import also reads transformers'
//     in-memory fused form (mlp.experts.gate_up_proj, a model's state_dict saved as it is).
// Anything else (RoPE with LayerNorm, partial or interleaved rotary, ...) is refused, naming the
// setting. The export cuts Megatron's padded vocabulary back to the tokenizer's size. The HF
// names, GPT-2's Conv1D [in, out] layout, Llama's separate q/k/v and gate/up projections and the
// config.json keys follow what transformers reads; the tests load every export with transformers.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "megatron/checkpoint/checkpoint.h"
#include "megatron/model/model_config.h"
#include "megatron/tokenizer/tokenizer.h"
#include "megatron/tokenizer/tokenizer_files.h"

namespace megatron::interop {

enum class HfFamily { kGpt2, kLlama, kMixtral, kQwen3, kQwen3Moe };

// transformers' class of a family ("GPT2LMHeadModel", "LlamaForCausalLM", "MixtralForCausalLM",
// "Qwen3ForCausalLM", "Qwen3MoeForCausalLM") and config.json's model_type ("gpt2", ...,
// "qwen3_moe").
const char* hf_architecture(HfFamily family);
const char* hf_model_type(HfFamily family);

// Which family can hold this model; throws megatron::Error naming every setting none can.
HfFamily hf_family_of(const model::ModelConfig& c);

struct HfExport {
  HfFamily family = HfFamily::kGpt2;
  nlohmann::ordered_json config;             // config.json
  nlohmann::ordered_json generation_config;  // generation_config.json
  std::vector<std::pair<std::string, at::Tensor>> tensors;  // HF names, fp32 (or the chosen dtype)
};

// Megatron's full (single-process) parameters under HF's names and layouts. `eod` is the
// tokenizer's end-of-document id (eos and pad in the generation defaults), `bos` its BOS (the EOD
// when it has none). The embedding and
// output rows are cut to `vocab_size`, the tokenizer's own size, dropping Megatron's padding (rows
// no token id reaches), as HF's Megatron converters do; config.json says vocab_size = `vocab_size`.
HfExport to_hf(const model::ModelConfig& c, const std::vector<std::pair<std::string, at::Tensor>>& params,
               std::int64_t eod, std::int64_t vocab_size, at::ScalarType dtype = at::kFloat,
               std::optional<std::int64_t> bos = std::nullopt);

// Writes an HF model folder: config.json, generation_config.json, model.safetensors (or
// model-0000K-of-0000N.safetensors + model.safetensors.index.json past `max_shard_bytes`), and the
// tokenizer's files as hf_tokenizer_export.h makes them (AutoTokenizer loads the folder and encodes
// as the run did).
// Everything goes into <dir>.tmp.<pid>/ first, renamed to <dir> when complete; an existing <dir> is
// refused.
void write_hf_folder(const std::string& dir, const HfExport& model, const tokenizer::TokenizerOptions& tokenizer,
                     std::int64_t model_max_length, std::uint64_t max_shard_bytes);

// The other way: a HuggingFace folder of one of these families (config.json, model.safetensors or shards with
// an index; as transformers' save_pretrained writes them) becomes a model-only checkpoint in
// <save_dir> for tensor-parallel `tp` x pipeline-parallel `pp` x expert-parallel `ep` (a mixture of
// experts' experts split over `ep` folders, Megatron's mp_rank_TT[_PPP]_EEE; iteration 0, no optimizer or RNG
// state: continue pretraining from it with --load and --finetune, or --no-load-optim
// --no-load-rng). The vocabulary is padded with zero rows to a multiple of `tp` where needed
// (Megatron's make-vocab-size-divisible-by x TP). Returns the megatron_train model flags that
// match it (the shape flags --load compares, plus dropout and init). Throws megatron::Error
// naming every HF setting that has no megatron_train equivalent, a key of config.json that is
// missing, of the wrong type or out of range, and, before any tensor is reshaped, every tensor
// whose shape is not the one config.json implies (and a layer count that differs from the file's).
// The output layer is tied as transformers ties it on load: as config.json says, unless the file
// holds an lm_head.weight different from the embedding (then untied, with a note).
struct HfImport {
  HfFamily family = HfFamily::kGpt2;
  std::vector<std::string> model_flags;
  bool has_experts = false;  // an MoE model (megatron_train needs --sequence-parallel with TP > 1)
  std::vector<std::string> notes;  // what the import decided that config.json did not say
};
HfImport import_hf(const std::string& hf_dir, const std::string& save_dir, int tp, int pp, int ep,
                   const tokenizer::TokenizerOptions& tokenizer,
                   checkpoint::CheckpointFormat format = checkpoint::CheckpointFormat::kNative);

// The tokenizer of a HuggingFace folder, its paths made absolute: GPT2BPETokenizer for the files
// `given` names, or the folder's vocab.json and merges.txt; HuggingFaceTokenizer for `given`'s
// tokenizer_model or the folder's tokenizer.json; Llama2Tokenizer (transformers' LlamaTokenizer: a
// BOS, then SentencePiece) for its tokenizer.model. Throws when the folder holds none of them.
tokenizer::TokenizerOptions hf_folder_tokenizer(const std::string& hf_dir, const tokenizer::TokenizerChoice& given);

}  // namespace megatron::interop
