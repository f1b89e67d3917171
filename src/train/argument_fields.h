// The one list of Arguments fields with their Megatron flag, argparse dest and help text. Parsing,
// the argument dump and the JSON round trip all walk this list, so a field added here is parsed,
// dumped and saved. Private to the train module.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "megatron/core/cli.h"
#include "megatron/train/arguments.h"

namespace megatron::train::detail {

enum class FlagKind {
  kValue,       // --flag VALUE (argparse type=int/float/str, or choices)
  kList,        // --flag V1 V2 ... (argparse nargs='*' / '+')
  kStoreTrue,   // --flag sets true
  kStoreFalse,  // --flag sets false (e.g. --disable-bias-linear -> add_bias_linear)
  kDerived,     // no flag: resolved from others or from the launcher
};

enum class DumpStyle {
  kPlain,
  kNoneWhenFalse,   // argparse store_true with default=None: prints None until given
  kIntWhenDefault,  // argparse type=float with an int default (2**32, 1000): the default prints as int
};

// A choice flag's values. `megatron` lists argparse's choices in Megatron's order (its "invalid
// choice" message); `implemented` those this build runs: a Megatron choice outside it is refused
// as "not supported by this build yet", and one beyond Megatron's is this build's own. An enum field's implemented choices are its enum's names
// (megatron/core/enum_names.h); a list left empty means the same list as the other.
struct Choices {
  std::span<const std::string_view> megatron;
  std::span<const std::string_view> implemented;
};

struct FieldSpec {
  std::string_view dest;
  std::string_view flags;  // CLI11 names, "--a,--b" for aliases; empty for kDerived
  FlagKind kind;
  std::string_view help;
  DumpStyle dump = DumpStyle::kPlain;
  Choices choices = {};
  // Why the flag, accepted for Megatron's command lines, changes nothing in this build; given, it
  // warns "<flag> is ignored: <why>" (as the catalogue's ignored flags do). Empty: it acts.
  std::string_view no_effect = {};
};

inline constexpr std::string_view kKernelChoice = "a kernel choice in Megatron; this build picks its own kernels";

// Megatron's choices for the choice flags whose values are strings here, or whose enum implements
// only some of them.
inline constexpr std::string_view kPositionEmbeddingChoices[] = {"learned_absolute", "rope", "yarn", "mrope", "relative", "none"};
inline constexpr std::string_view kOptimizerChoices[] = {"adam", "sgd", "muon", "dist_muon", "lion", "soap", "adaptive_muon"};
inline constexpr std::string_view kImplementedOptimizers[] = {"adam"};
inline constexpr std::string_view kDataloaderChoices[] = {"single", "cyclic", "external"};
inline constexpr std::string_view kImplementedDataloaders[] = {"single"};
inline constexpr std::string_view kDistributedBackendChoices[] = {"nccl", "gloo"};
inline constexpr std::string_view kLoadBalancingChoices[] = {"aux_loss", "seq_aux_loss", "global_aux_loss", "sinkhorn", "quantile_balancing", "none"};
inline constexpr std::string_view kDispatcherChoices[] = {"allgather", "alltoall", "flex", "alltoall_seq"};
inline constexpr std::string_view kImplementedDispatchers[] = {"allgather", "alltoall"};
inline constexpr std::string_view kRouterDtypeChoices[] = {"fp32", "fp64"};
inline constexpr std::string_view kImplementedRouterDtypes[] = {"fp32"};
// Megatron's checkpoint formats; this build writes torch_dist and its own, megatron_cpp (a choice
// beyond Megatron's: an implemented choice need not be one of Megatron's).
inline constexpr std::string_view kCkptFormatChoices[] = {"torch", "torch_dist", "zarr", "torch_dcp", "fsdp_dtensor"};
inline constexpr std::string_view kImplementedCkptFormats[] = {"torch_dist", "megatron_cpp"};
inline constexpr std::string_view kFp8FormatChoices[] = {"e4m3", "hybrid"};  // the flag itself is refused

// Choices as argparse lists them in "invalid choice" messages: 'a', 'b', 'c'.
inline std::string quoted(std::span<const std::string_view> names) {
  std::string out;
  for (const auto name : names) out += (out.empty() ? "'" : ", '") + std::string(name) + "'";
  return out;
}

// The name a flag is reported by: the first of its aliases ("--a" of "--a,--b").
inline std::string primary_flag(std::string_view flags) { return std::string(flags.substr(0, flags.find(','))); }

// Calls f(spec, field) for every field of `a` (Arguments or const Arguments).
template <typename A, typename F>
void for_each_field(A& a, F&& f) {
  using K = FlagKind;
  auto& m = a.model;
  f(FieldSpec{"num_layers", "--num-layers", K::kValue, "Number of transformer layers (required)."}, m.num_layers);
  f(FieldSpec{"hidden_size", "--hidden-size", K::kValue, "Transformer hidden size (required)."}, m.hidden_size);
  f(FieldSpec{"ffn_hidden_size", "--ffn-hidden-size", K::kValue, "MLP hidden size; default 4*hidden-size (SwiGLU: int(8h/3/64)*64)."}, m.ffn_hidden_size);
  f(FieldSpec{"num_attention_heads", "--num-attention-heads", K::kValue, "Number of attention heads (required)."}, m.num_attention_heads);
  f(FieldSpec{"group_query_attention", "--group-query-attention", K::kStoreTrue, "Use grouped-query attention."}, m.group_query_attention);
  f(FieldSpec{"num_query_groups", "--num-query-groups", K::kValue, "Number of key/value heads with --group-query-attention."}, m.num_query_groups);
  f(FieldSpec{"kv_channels", "--kv-channels", K::kValue, "Head size; default hidden-size / num-attention-heads."}, m.kv_channels);
  f(FieldSpec{"seq_length", "--seq-length", K::kValue, "Training sequence length (required)."}, m.seq_length);
  f(FieldSpec{"max_position_embeddings", "--max-position-embeddings", K::kValue, "Position table size (required, >= seq-length)."}, m.max_position_embeddings);
  f(FieldSpec{"position_embedding_type", "--position-embedding-type", K::kValue, "learned_absolute or rope.", DumpStyle::kPlain, {kPositionEmbeddingChoices, {}}}, m.position_embedding_type);
  f(FieldSpec{"use_rotary_position_embeddings", "--use-rotary-position-embeddings", K::kStoreTrue, "Deprecated: --position-embedding-type rope."}, m.use_rotary_position_embeddings);
  f(FieldSpec{"rotary_base", "--rotary-base", K::kValue, "Rotary embedding base."}, m.rotary_base);
  f(FieldSpec{"rotary_percent", "--rotary-percent", K::kValue, "Fraction of the head dimension rotated."}, m.rotary_percent);
  f(FieldSpec{"normalization", "--normalization", K::kValue, "LayerNorm or RMSNorm."}, m.normalization);
  f(FieldSpec{"norm_epsilon", "--norm-epsilon", K::kValue, "Epsilon of LayerNorm and RMSNorm."}, m.norm_epsilon);
  f(FieldSpec{"swiglu", "--swiglu", K::kStoreTrue, "SiLU-gated MLP instead of GeLU."}, m.swiglu);
  f(FieldSpec{"qk_layernorm", "--qk-layernorm", K::kStoreTrue, "Normalize each head's queries and keys (Qwen3, OLMo 2)."}, m.qk_layernorm);
  f(FieldSpec{"untie_embeddings_and_output_weights", "--untie-embeddings-and-output-weights", K::kStoreTrue, "Separate output layer weights."}, m.untie_embeddings_and_output_weights);
  f(FieldSpec{"add_bias_linear", "--disable-bias-linear", K::kStoreFalse, "No biases in the linear layers."}, m.add_bias_linear);
  f(FieldSpec{"add_qkv_bias", "--add-qkv-bias", K::kStoreTrue, "Bias in the QKV layer only (with --disable-bias-linear)."}, m.add_qkv_bias);
  f(FieldSpec{"init_method_std", "--init-method-std", K::kValue, "Standard deviation of the weight initialisation."}, m.init_method_std);
  f(FieldSpec{"attention_dropout", "--attention-dropout", K::kValue, "Dropout on attention probabilities."}, m.attention_dropout);
  f(FieldSpec{"hidden_dropout", "--hidden-dropout", K::kValue, "Dropout on hidden states and embeddings."}, m.hidden_dropout);
  f(FieldSpec{"make_vocab_size_divisible_by", "--make-vocab-size-divisible-by", K::kValue, "Pad the vocabulary to a multiple of this times TP."}, m.make_vocab_size_divisible_by);
  f(FieldSpec{"bias_gelu_fusion", "--no-bias-gelu-fusion", K::kStoreFalse, "Unfused bias + exact (erf) GeLU instead of the fused tanh GeLU."}, m.bias_gelu_fusion);
  f(FieldSpec{"bias_swiglu_fusion", "--no-bias-swiglu-fusion", K::kStoreFalse, "Unfused bias + SwiGLU."}, m.bias_swiglu_fusion);
  f(FieldSpec{"bias_dropout_fusion", "--no-bias-dropout-fusion", K::kStoreFalse, "Unfused bias-dropout-add (same numbers here).", DumpStyle::kPlain, {}, kKernelChoice}, m.bias_dropout_fusion);
  f(FieldSpec{"masked_softmax_fusion", "--no-masked-softmax-fusion", K::kStoreFalse, "Plain ATen causal softmax instead of the fused kernel."}, m.masked_softmax_fusion);
  f(FieldSpec{"apply_rope_fusion", "--no-rope-fusion", K::kStoreFalse, "Plain ATen rotary embedding instead of the fused kernel."}, m.apply_rope_fusion);
  f(FieldSpec{"gradient_accumulation_fusion", "--no-gradient-accumulation-fusion", K::kStoreFalse, "Accumulate weight gradients through the main-grad hook (the only path in this build).", DumpStyle::kPlain, {}, "weight gradients always accumulate into the fp32 main-grad buffer here"}, m.gradient_accumulation_fusion);
  f(FieldSpec{"attention_backend", "--attention-backend", K::kValue, "auto, flash, fused (cuDNN), unfused or local."}, m.attention_backend);
  f(FieldSpec{"recompute_activations", "--recompute-activations", K::kStoreTrue, "Selective recomputation of the core attention."}, m.recompute_activations);
  f(FieldSpec{"recompute_granularity", "--recompute-granularity", K::kValue, "full or selective."}, m.recompute_granularity);
  f(FieldSpec{"recompute_method", "--recompute-method", K::kValue, "uniform or block (with full)."}, m.recompute_method);
  f(FieldSpec{"recompute_num_layers", "--recompute-num-layers", K::kValue, "Layers per recomputed chunk (uniform) or recomputed layers per stage (block)."}, m.recompute_num_layers);
  f(FieldSpec{"recompute_modules", "--recompute-modules", K::kList, "Modules recomputed with selective granularity (core_attn)."}, m.recompute_modules);

  auto& e = a.moe;
  f(FieldSpec{"num_experts", "--num-experts", K::kValue, "Experts per MoE layer (mixture of experts)."}, e.num_experts);
  f(FieldSpec{"moe_layer_freq", "--moe-layer-freq", K::kValue, "An integer N: layer i (0-based) is an MoE layer when i % N == 0; or a list expression of 0 (dense) and 1 (MoE) per layer, e.g. \"([0]*3+[1]*29)\"."}, e.moe_layer_freq);
  f(FieldSpec{"moe_ffn_hidden_size", "--moe-ffn-hidden-size", K::kValue, "Each expert's MLP size; default --ffn-hidden-size."}, e.moe_ffn_hidden_size);
  f(FieldSpec{"moe_shared_expert_intermediate_size", "--moe-shared-expert-intermediate-size", K::kValue, "MLP size of the shared expert every token also passes (none by default)."}, e.moe_shared_expert_intermediate_size);
  f(FieldSpec{"moe_shared_expert_overlap", "--moe-shared-expert-overlap", K::kStoreTrue, "Overlap the shared expert with the token dispatch."}, e.moe_shared_expert_overlap);
  f(FieldSpec{"moe_grouped_gemm", "--moe-grouped-gemm", K::kStoreTrue, "Experts as one grouped GEMM (always so in this build).", DumpStyle::kPlain, {}, "the experts always run as one grouped GEMM here"}, e.moe_grouped_gemm);
  f(FieldSpec{"moe_router_load_balancing_type", "--moe-router-load-balancing-type", K::kValue, "aux_loss, seq_aux_loss or none.", DumpStyle::kPlain, {kLoadBalancingChoices, {}}}, e.moe_router_load_balancing_type);
  f(FieldSpec{"moe_router_topk", "--moe-router-topk", K::kValue, "Experts per token."}, e.moe_router_topk);
  f(FieldSpec{"moe_router_score_function", "--moe-router-score-function", K::kValue, "softmax or sigmoid."}, e.moe_router_score_function);
  f(FieldSpec{"moe_router_pre_softmax", "--moe-router-pre-softmax", K::kStoreTrue, "Softmax over all experts before the top-k (else over the chosen k)."}, e.moe_router_pre_softmax);
  f(FieldSpec{"moe_router_topk_scaling_factor", "--moe-router-topk-scaling-factor", K::kValue, "Multiplies the routing probabilities."}, e.moe_router_topk_scaling_factor);
  f(FieldSpec{"moe_router_num_groups", "--moe-router-num-groups", K::kValue, "Expert groups of group-limited routing."}, e.moe_router_num_groups);
  f(FieldSpec{"moe_router_group_topk", "--moe-router-group-topk", K::kValue, "Groups a token's experts come from (group-limited routing)."}, e.moe_router_group_topk);
  f(FieldSpec{"moe_router_enable_expert_bias", "--moe-router-enable-expert-bias", K::kStoreTrue, "Aux-loss-free balancing: a per-expert bias on the selection scores, updated each step."}, e.moe_router_enable_expert_bias);
  f(FieldSpec{"moe_router_bias_update_rate", "--moe-router-bias-update-rate", K::kValue, "Step of the expert bias update."}, e.moe_router_bias_update_rate);
  f(FieldSpec{"moe_router_dtype", "--moe-router-dtype", K::kValue, "Routing precision (fp32 here).", DumpStyle::kPlain, {kRouterDtypeChoices, kImplementedRouterDtypes}, "the router always computes in fp32 here"}, e.moe_router_dtype);
  f(FieldSpec{"moe_aux_loss_coeff", "--moe-aux-loss-coeff", K::kValue, "Coefficient of the load-balancing loss (0: none)."}, e.moe_aux_loss_coeff);
  f(FieldSpec{"moe_z_loss_coeff", "--moe-z-loss-coeff", K::kValue, "Coefficient of the router z-loss."}, e.moe_z_loss_coeff);
  f(FieldSpec{"moe_input_jitter_eps", "--moe-input-jitter-eps", K::kValue, "Multiplicative jitter of the router input."}, e.moe_input_jitter_eps);
  f(FieldSpec{"moe_per_layer_logging", "--moe-per-layer-logging", K::kStoreTrue, "Log each MoE layer's auxiliary losses."}, e.moe_per_layer_logging);
  f(FieldSpec{"moe_token_dispatcher_type", "--moe-token-dispatcher-type", K::kValue, "allgather or alltoall.", DumpStyle::kPlain, {kDispatcherChoices, kImplementedDispatchers}}, e.moe_token_dispatcher_type);
  f(FieldSpec{"moe_permute_fusion", "--moe-permute-fusion", K::kStoreTrue, "Fused token permutation (a kernel choice; no effect here).", DumpStyle::kPlain, {}, kKernelChoice}, e.moe_permute_fusion);
  f(FieldSpec{"moe_expert_capacity_factor", "--moe-expert-capacity-factor", K::kValue, "Tokens per expert as a multiple of an even share (none: dropless)."}, e.moe_expert_capacity_factor);
  f(FieldSpec{"moe_pad_expert_input_to_capacity", "--moe-pad-expert-input-to-capacity", K::kStoreTrue, "Every expert computes exactly its capacity of tokens."}, e.moe_pad_expert_input_to_capacity);
  f(FieldSpec{"moe_token_drop_policy", "--moe-token-drop-policy", K::kValue, "probs or position: which tokens an expert over capacity keeps."}, e.moe_token_drop_policy);

  auto& t = a.training;
  f(FieldSpec{"micro_batch_size", "--micro-batch-size", K::kValue, "Sequences per microbatch per model replica (required)."}, t.micro_batch_size);
  f(FieldSpec{"global_batch_size", "--global-batch-size", K::kValue, "Sequences per iteration; default micro-batch-size * DP."}, t.global_batch_size);
  f(FieldSpec{"train_iters", "--train-iters", K::kValue, "Iterations to train (or --train-samples)."}, t.train_iters);
  f(FieldSpec{"train_samples", "--train-samples", K::kValue, "Samples to train (or --train-iters)."}, t.train_samples);
  f(FieldSpec{"exit_interval", "--exit-interval", K::kValue, "Exit when the iteration is divisible by this."}, t.exit_interval);
  f(FieldSpec{"exit_duration_in_mins", "--exit-duration-in-mins", K::kValue, "Save and exit once training has run this many minutes (all ranks agree)."}, t.exit_duration_in_mins);
  f(FieldSpec{"exit_signal_handler", "--exit-signal-handler", K::kStoreTrue, "On --exit-signal: finish the iteration, save, exit 0."}, t.exit_signal_handler);
  f(FieldSpec{"exit_signal", "--exit-signal", K::kValue, "The signal --exit-signal-handler catches (SIGTERM)."}, t.exit_signal);
  f(FieldSpec{"seed", "--seed", K::kValue, "Random seed (positive)."}, t.seed);

  auto& o = a.optimizer;
  f(FieldSpec{"optimizer", "--optimizer", K::kValue, "adam (AdamW) in this build.", DumpStyle::kPlain, {kOptimizerChoices, kImplementedOptimizers}}, o.optimizer);
  f(FieldSpec{"lr", "--lr", K::kValue, "Peak learning rate (required)."}, o.lr);
  f(FieldSpec{"min_lr", "--min-lr", K::kValue, "Learning rate floor of the decay."}, o.min_lr);
  f(FieldSpec{"weight_decay", "--weight-decay", K::kValue, "Decoupled weight decay (not on biases and 1-D parameters)."}, o.weight_decay);
  f(FieldSpec{"start_weight_decay", "--start-weight-decay", K::kValue, "Weight decay at the start (non-constant increment styles)."}, o.start_weight_decay);
  f(FieldSpec{"end_weight_decay", "--end-weight-decay", K::kValue, "Weight decay at the end (non-constant increment styles)."}, o.end_weight_decay);
  f(FieldSpec{"weight_decay_incr_style", "--weight-decay-incr-style", K::kValue, "How weight decay moves from --start-weight-decay to --end-weight-decay over training: constant, linear or cosine."}, o.weight_decay_incr_style);
  f(FieldSpec{"clip_grad", "--clip-grad", K::kValue, "Clip the global gradient L2 norm to this (0: off)."}, o.clip_grad);
  f(FieldSpec{"adam_beta1", "--adam-beta1", K::kValue, "Adam beta1."}, o.adam_beta1);
  f(FieldSpec{"adam_beta2", "--adam-beta2", K::kValue, "Adam beta2."}, o.adam_beta2);
  f(FieldSpec{"adam_eps", "--adam-eps", K::kValue, "Adam epsilon."}, o.adam_eps);

  auto& s = a.scheduler;
  f(FieldSpec{"lr_decay_style", "--lr-decay-style", K::kValue, "constant, linear, cosine, inverse-square-root or WSD."}, s.lr_decay_style);
  f(FieldSpec{"lr_wsd_decay_style", "--lr-wsd-decay-style", K::kValue, "WSD annealing: exponential, linear, cosine or minus_sqrt."}, s.lr_wsd_decay_style);
  f(FieldSpec{"lr_decay_iters", "--lr-decay-iters", K::kValue, "Iterations to decay over; default --train-iters."}, s.lr_decay_iters);
  f(FieldSpec{"lr_decay_samples", "--lr-decay-samples", K::kValue, "Samples to decay over; default --train-samples."}, s.lr_decay_samples);
  f(FieldSpec{"lr_wsd_decay_iters", "--lr-wsd-decay-iters", K::kValue, "Iterations of the WSD annealing phase."}, s.lr_wsd_decay_iters);
  f(FieldSpec{"lr_wsd_decay_samples", "--lr-wsd-decay-samples", K::kValue, "Samples of the WSD annealing phase."}, s.lr_wsd_decay_samples);
  f(FieldSpec{"lr_warmup_fraction", "--lr-warmup-fraction", K::kValue, "Warmup as a fraction of the decay steps."}, s.lr_warmup_fraction);
  f(FieldSpec{"lr_warmup_iters", "--lr-warmup-iters", K::kValue, "Warmup iterations."}, s.lr_warmup_iters);
  f(FieldSpec{"lr_warmup_samples", "--lr-warmup-samples", K::kValue, "Warmup samples."}, s.lr_warmup_samples);
  f(FieldSpec{"lr_warmup_init", "--lr-warmup-init", K::kValue, "Learning rate at the start of warmup."}, s.lr_warmup_init);
  f(FieldSpec{"override_opt_param_scheduler", "--override-opt-param-scheduler,--override-opt_param-scheduler", K::kStoreTrue, "On resume, take this command line's learning-rate schedule instead of the checkpoint's."}, s.override_opt_param_scheduler);
  f(FieldSpec{"use_checkpoint_opt_param_scheduler", "--use-checkpoint-opt-param-scheduler,--use-checkpoint-opt_param-scheduler", K::kStoreTrue, "On resume, continue the checkpoint's learning-rate schedule, whatever this command line says."}, s.use_checkpoint_opt_param_scheduler);

  auto& d = a.data;
  f(FieldSpec{"data_path", "--data-path", K::kList, "Dataset prefixes, optionally as weight prefix pairs (blending)."}, d.data_path);
  f(FieldSpec{"split", "--split", K::kValue, "Train, validation, test proportions, e.g. 949,50,1."}, d.split);
  f(FieldSpec{"train_data_path", "--train-data-path", K::kList, "Separate training datasets."}, d.train_data_path);
  f(FieldSpec{"valid_data_path", "--valid-data-path", K::kList, "Separate validation datasets."}, d.valid_data_path);
  f(FieldSpec{"test_data_path", "--test-data-path", K::kList, "Separate test datasets."}, d.test_data_path);
  f(FieldSpec{"mock_data", "--mock-data", K::kStoreTrue, "Train on generated mock data."}, d.mock_data);
  f(FieldSpec{"data_cache_path", "--data-cache-path", K::kValue, "Folder for the dataset index caches."}, d.data_cache_path);
  f(FieldSpec{"dataloader_type", "--dataloader-type", K::kValue, "single in this build.", DumpStyle::kPlain, {kDataloaderChoices, kImplementedDataloaders}}, d.dataloader_type);
  f(FieldSpec{"num_workers", "--num-workers", K::kValue, "GPU ranks: micro-batches read ahead on a background thread, 2 per worker; 0 reads them on the training thread. CPU ranks read on the training thread (a thread would take cores from the computation)."}, d.num_workers);
  f(FieldSpec{"num_dataset_builder_threads", "--num-dataset-builder-threads", K::kValue, "Threads building dataset indices.", DumpStyle::kPlain, {}, "each rank builds its datasets' indices on one thread"}, d.num_dataset_builder_threads);
  f(FieldSpec{"mid_level_dataset_surplus", "--mid-level-dataset-surplus", K::kValue, "Extra samples built per blended dataset."}, d.mid_level_dataset_surplus);
  f(FieldSpec{"reset_position_ids", "--reset-position-ids", K::kStoreTrue, "Restart position ids after each end-of-document token."}, d.reset_position_ids);
  f(FieldSpec{"reset_attention_mask", "--reset-attention-mask", K::kStoreTrue, "No attention across end-of-document tokens."}, d.reset_attention_mask);
  f(FieldSpec{"eod_mask_loss", "--eod-mask-loss", K::kStoreTrue, "No loss on end-of-document tokens."}, d.eod_mask_loss);
  f(FieldSpec{"create_attention_mask_in_dataloader", "--no-create-attention-mask-in-dataloader", K::kStoreFalse, "Do not build attention masks in the data loader.", DumpStyle::kPlain, {}, "the model builds the masks it needs itself"}, d.create_attention_mask_in_dataloader);

  auto& k = a.tokenizer;
  f(FieldSpec{"tokenizer_type", "--tokenizer-type", K::kValue, "GPT2BPETokenizer, HuggingFaceTokenizer, TikTokenizer, SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer or NullTokenizer.", DumpStyle::kPlain, {tokenizer::kMegatronTokenizerTypes, {}}}, k.tokenizer_type);
  f(FieldSpec{"vocab_file", "--vocab-file", K::kValue, "GPT-2 vocab.json."}, k.vocab_file);
  f(FieldSpec{"merge_file", "--merge-file", K::kValue, "GPT-2 merges.txt."}, k.merge_file);
  f(FieldSpec{"tokenizer_model", "--tokenizer-model", K::kValue, "HuggingFaceTokenizer: a folder with tokenizer.json; SentencePiece types: the .model file; TikTokenizer: the vocabulary .json."}, k.tokenizer_model);
  f(FieldSpec{"vocab_size", "--vocab-size", K::kValue, "NullTokenizer: the vocabulary size; TikTokenizer: ids below this (default 131072)."}, k.vocab_size);
  f(FieldSpec{"padded_vocab_size", "--padded-vocab-size", K::kValue, "Model vocabulary size; default padded from the tokenizer's."}, k.padded_vocab_size);
  f(FieldSpec{"vocab_extra_ids", "--vocab-extra-ids", K::kValue, "SentencePieceTokenizer: <extra_id_i> tokens added to the vocabulary."}, k.vocab_extra_ids);
  f(FieldSpec{"tiktoken_pattern", "--tiktoken-pattern", K::kValue, "TikTokenizer: the pre-tokenizer regex, v1 or v2."}, k.tiktoken_pattern);
  f(FieldSpec{"tiktoken_num_special_tokens", "--tiktoken-num-special-tokens", K::kValue, "TikTokenizer: ids reserved for special tokens."}, k.tiktoken_num_special_tokens);
  f(FieldSpec{"tiktoken_special_tokens", "--tiktoken-special-tokens", K::kList, "TikTokenizer: the special tokens (with <unk> <s> </s>)."}, k.tiktoken_special_tokens);

  auto& l = a.logging;
  f(FieldSpec{"log_interval", "--log-interval", K::kValue, "Iterations between training log lines."}, l.log_interval);
  f(FieldSpec{"log_throughput", "--log-throughput", K::kStoreTrue, "Log TFLOP/s per GPU."}, l.log_throughput);
  f(FieldSpec{"eval_interval", "--eval-interval", K::kValue, "Iterations between validations."}, l.eval_interval);
  f(FieldSpec{"eval_iters", "--eval-iters", K::kValue, "Iterations per validation."}, l.eval_iters);
  f(FieldSpec{"tensorboard_dir", "--tensorboard-dir", K::kValue, "Write TensorBoard event files here (the last rank)."}, l.tensorboard_dir);
  f(FieldSpec{"tensorboard_log_interval", "--tensorboard-log-interval", K::kValue, "Iterations between TensorBoard scalars."}, l.tensorboard_log_interval);
  f(FieldSpec{"tensorboard_queue_size", "--tensorboard-queue-size", K::kValue, "TensorBoard records held before a write."}, l.tensorboard_queue_size);
  f(FieldSpec{"log_timers_to_tensorboard", "--log-timers-to-tensorboard", K::kStoreTrue, "Write iteration-time (and throughput with --log-throughput)."}, l.log_timers_to_tensorboard);
  f(FieldSpec{"log_validation_ppl_to_tensorboard", "--log-validation-ppl-to-tensorboard", K::kStoreTrue, "Write the validation perplexity too."}, l.log_validation_ppl_to_tensorboard);
  f(FieldSpec{"log_memory_to_tensorboard", "--log-memory-to-tensorboard", K::kStoreTrue, "Write GPU memory statistics."}, l.log_memory_to_tensorboard);
  f(FieldSpec{"log_loss_scale_to_tensorboard", "--no-log-loss-scale-to-tensorboard,--disable-log-loss-scale-to-tensorboard", K::kStoreFalse, "Do not write the loss scale."}, l.log_loss_scale_to_tensorboard);
  f(FieldSpec{"log_world_size_to_tensorboard", "--log-world-size-to-tensorboard", K::kStoreTrue, "Write the world size."}, l.log_world_size_to_tensorboard);
  f(FieldSpec{"logging_level", "--logging-level", K::kValue, "Python logging level of warnings and notes (10 DEBUG ... 50 CRITICAL); default MEGATRON_LOGGING_LEVEL, else 20."}, l.logging_level);

  auto& c = a.checkpoint;
  f(FieldSpec{"save", "--save", K::kValue, "Folder to save checkpoints to."}, c.save);
  f(FieldSpec{"load", "--load", K::kValue, "Folder to load a checkpoint from."}, c.load);
  f(FieldSpec{"save_interval", "--save-interval,--persistent-save-interval", K::kValue, "Iterations between checkpoints (required with --save)."}, c.save_interval);
  f(FieldSpec{"no_save_optim", "--no-save-optim", K::kStoreTrue, "Do not save the optimizer state.", DumpStyle::kNoneWhenFalse}, c.no_save_optim);
  f(FieldSpec{"no_save_rng", "--no-save-rng", K::kStoreTrue, "Do not save the RNG state.", DumpStyle::kNoneWhenFalse}, c.no_save_rng);
  f(FieldSpec{"no_load_optim", "--no-load-optim", K::kStoreTrue, "Do not load the optimizer state.", DumpStyle::kNoneWhenFalse}, c.no_load_optim);
  f(FieldSpec{"no_load_rng", "--no-load-rng", K::kStoreTrue, "Do not load the RNG state.", DumpStyle::kNoneWhenFalse}, c.no_load_rng);
  f(FieldSpec{"save_tokenizer_assets", "--no-save-tokenizer-assets", K::kStoreFalse, "Do not copy the tokenizer's files into each checkpoint's tokenizer/ folder."}, c.save_tokenizer_assets);
  f(FieldSpec{"finetune", "--finetune", K::kStoreTrue, "Load weights only; start at iteration 0."}, c.finetune);
  f(FieldSpec{"async_save", "--async-save", K::kStoreTrue, "Write checkpoints from a host snapshot while training goes on; the tracker moves once every rank's files are durable."}, c.async_save);
  f(FieldSpec{"ckpt_format", "--ckpt-format", K::kValue, "Format --save writes: megatron_cpp (this build's own, the default) or torch_dist (Megatron-Core's distributed checkpoint: the model and counters; the optimizer and RNG state not yet). --load reads either.", DumpStyle::kPlain, {kCkptFormatChoices, kImplementedCkptFormats}}, c.ckpt_format);
  f(FieldSpec{"save_retain_interval", "--save-retain-interval", K::kValue, "After each save, delete older checkpoints except multiples of this (a multiple of --save-interval)."}, c.save_retain_interval);
  f(FieldSpec{"keep_last_checkpoints", "--keep-last-checkpoints", K::kValue, "After each save, keep only the newest K checkpoints (plus --save-retain-interval multiples). Not in Megatron."}, c.keep_last_checkpoints);

  auto& p = a.parallel;
  f(FieldSpec{"tensor_model_parallel_size", "--tensor-model-parallel-size", K::kValue, "Tensor parallel size."}, p.tensor_model_parallel_size);
  f(FieldSpec{"pipeline_model_parallel_size", "--pipeline-model-parallel-size", K::kValue, "Pipeline parallel size."}, p.pipeline_model_parallel_size);
  f(FieldSpec{"context_parallel_size", "--context-parallel-size", K::kValue, "Context parallel size."}, p.context_parallel_size);
  f(FieldSpec{"expert_model_parallel_size", "--expert-model-parallel-size", K::kValue, "Expert parallel size."}, p.expert_model_parallel_size);
  f(FieldSpec{"expert_tensor_parallel_size", "--expert-tensor-parallel-size", K::kValue, "Tensor parallel size of the experts; default --tensor-model-parallel-size."}, p.expert_tensor_parallel_size);
  f(FieldSpec{"num_layers_per_virtual_pipeline_stage", "--num-layers-per-virtual-pipeline-stage", K::kValue, "Interleaved pipeline: layers per virtual stage."}, p.num_layers_per_virtual_pipeline_stage);
  f(FieldSpec{"num_virtual_stages_per_pipeline_rank", "--num-virtual-stages-per-pipeline-rank", K::kValue, "Interleaved pipeline: virtual stages per rank."}, p.num_virtual_stages_per_pipeline_rank);
  f(FieldSpec{"microbatch_group_size_per_vp_stage", "--microbatch-group-size-per-virtual-pipeline-stage", K::kValue, "Interleaved pipeline: microbatch group size."}, p.microbatch_group_size_per_vp_stage);
  f(FieldSpec{"decoder_first_pipeline_num_layers", "--decoder-first-pipeline-num-layers", K::kValue, "Layers on the first pipeline stage."}, p.decoder_first_pipeline_num_layers);
  f(FieldSpec{"decoder_last_pipeline_num_layers", "--decoder-last-pipeline-num-layers", K::kValue, "Layers on the last pipeline stage."}, p.decoder_last_pipeline_num_layers);
  f(FieldSpec{"cp_comm_type", "--cp-comm-type", K::kList, "Context parallel communication type."}, p.cp_comm_type);
  f(FieldSpec{"sequence_parallel", "--sequence-parallel", K::kStoreTrue, "Sequence parallelism (with TP > 1)."}, p.sequence_parallel);
  f(FieldSpec{"use_distributed_optimizer", "--use-distributed-optimizer", K::kStoreTrue, "Shard optimizer state over DP."}, p.use_distributed_optimizer);
  f(FieldSpec{"overlap_grad_reduce", "--overlap-grad-reduce", K::kStoreTrue, "Overlap the DP gradient reduction with backward."}, p.overlap_grad_reduce);
  f(FieldSpec{"ddp_bucket_size", "--ddp-bucket-size", K::kValue, "Gradient bucket size in elements (default: max(40M, 1M x DP) with --overlap-grad-reduce, else one bucket)."}, p.ddp_bucket_size);
  f(FieldSpec{"overlap_param_gather", "--overlap-param-gather", K::kStoreTrue, "Overlap the parameter all-gather (distributed optimizer)."}, p.overlap_param_gather);
  f(FieldSpec{"overlap_p2p_comm", "--no-overlap-p2p-communication", K::kStoreFalse, "Do not overlap pipeline communication."}, p.overlap_p2p_comm);
  f(FieldSpec{"use_tp_pp_dp_mapping", "--use-tp-pp-dp-mapping", K::kStoreTrue, "Rank order tp-cp-ep-pp-dp."}, p.use_tp_pp_dp_mapping);
  f(FieldSpec{"distributed_backend", "--distributed-backend", K::kValue, "nccl or gloo.", DumpStyle::kPlain, {kDistributedBackendChoices, {}}, "ranks use NCCL on GPUs and MPI on CPUs, chosen by the device"}, p.distributed_backend);
  f(FieldSpec{"distributed_timeout_minutes", "--distributed-timeout-minutes", K::kValue, "Collective timeout in minutes."}, p.distributed_timeout_minutes);
  f(FieldSpec{"local_rank", "--local-rank", K::kValue, "Local rank (default: LOCAL_RANK)."}, p.local_rank);
  f(FieldSpec{"world_size", "", K::kDerived, ""}, p.world_size);
  f(FieldSpec{"rank", "", K::kDerived, ""}, p.rank);
  f(FieldSpec{"data_parallel_size", "", K::kDerived, ""}, p.data_parallel_size);

  auto& x = a.precision;
  f(FieldSpec{"fp16", "--fp16", K::kStoreTrue, "fp16 mixed precision."}, x.fp16);
  f(FieldSpec{"bf16", "--bf16", K::kStoreTrue, "bf16 mixed precision."}, x.bf16);
  f(FieldSpec{"loss_scale", "--loss-scale", K::kValue, "Static loss scale (fp16); default dynamic."}, x.loss_scale);
  f(FieldSpec{"initial_loss_scale", "--initial-loss-scale", K::kValue, "Initial dynamic loss scale.", DumpStyle::kIntWhenDefault}, x.initial_loss_scale);
  f(FieldSpec{"min_loss_scale", "--min-loss-scale", K::kValue, "Minimum dynamic loss scale."}, x.min_loss_scale);
  f(FieldSpec{"loss_scale_window", "--loss-scale-window", K::kValue, "Iterations between loss scale increases.", DumpStyle::kIntWhenDefault}, x.loss_scale_window);
  f(FieldSpec{"hysteresis", "--hysteresis", K::kValue, "Overflows tolerated before lowering the scale."}, x.hysteresis);
  f(FieldSpec{"attention_softmax_in_fp32", "--attention-softmax-in-fp32", K::kStoreTrue, "Attention softmax in fp32.", DumpStyle::kPlain, {}, "the attention softmax always computes in fp32 here"}, x.attention_softmax_in_fp32);
  f(FieldSpec{"apply_query_key_layer_scaling", "--apply-query-key-layer-scaling", K::kStoreTrue, "Scale Q*K^T by 1/layer (softmax in fp32).", DumpStyle::kPlain, {}, "with the softmax in fp32 (always so here) the scaling cancels out"}, x.apply_query_key_layer_scaling);
  f(FieldSpec{"accumulate_allreduce_grads_in_fp32", "--accumulate-allreduce-grads-in-fp32", K::kStoreTrue, "Accumulate and reduce gradients in fp32."}, x.accumulate_allreduce_grads_in_fp32);
  f(FieldSpec{"grad_reduce_in_bf16", "--grad-reduce-in-bf16", K::kStoreTrue, "Reduce gradients in bf16."}, x.grad_reduce_in_bf16);
  f(FieldSpec{"fp16_lm_cross_entropy", "--fp16-lm-cross-entropy", K::kStoreTrue, "Cross entropy in fp16.", DumpStyle::kPlain, {}, "the cross entropy always computes in fp32 here"}, x.fp16_lm_cross_entropy);
  f(FieldSpec{"fp32_residual_connection", "--fp32-residual-connection", K::kStoreTrue, "Residual stream in fp32."}, x.fp32_residual_connection);
  f(FieldSpec{"fp8", "--fp8-format", K::kValue, "FP8 format (e4m3 or hybrid).", DumpStyle::kPlain, {kFp8FormatChoices, {}}}, x.fp8);
  f(FieldSpec{"params_dtype", "", K::kDerived, ""}, x.params_dtype);
}

// Each field's dest and its value as Python's str() prints it in the argument dump.
std::vector<std::pair<std::string_view, std::string>> dump_values(const Arguments& args);

}  // namespace megatron::train::detail
