// pretrain_gpt.py's command line (spec section 6): plain config structs with Megatron's defaults,
// parsing with Megatron's flag names and checks (all problems reported together), the start-up
// messages and argument dump (spec 5.3) and a JSON round trip. No LibTorch; no file is read here
// except to check that tokenizer files exist.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "megatron/model/model_config.h"      // the model's enums (no LibTorch)
#include "megatron/optim/param_scheduler.h"  // the scheduler's enums (a header without LibTorch)
#include "megatron/tokenizer/tokenizer.h"     // the tokenizer's type

namespace megatron::train {

// The choice flags that select a module's behaviour hold that module's own enum, spelt by the
// module's table (megatron/core/enum_names.h).
using PositionEmbeddingType = model::PositionEmbedding;
using Normalization = model::Normalization;
using AttentionBackend = model::AttentionBackend;
using RecomputeGranularity = model::RecomputeGranularity;
using RecomputeMethod = model::RecomputeMethod;
using RouterScore = model::RouterScore;
using LoadBalancing = model::LoadBalancing;
using TokenDropPolicy = model::TokenDropPolicy;
using LrDecayStyle = optim::LrDecayStyle;
using WsdDecayStyle = optim::WsdDecayStyle;
using WdIncrStyle = optim::WdIncrStyle;

// Fields carry argparse's attribute names (dest). Megatron's None is std::nullopt; required
// values that Megatron leaves None until given are 0 here until parse_arguments checks them.

struct ModelArgs {
  int num_layers = 0;                 // --num-layers (required)
  int hidden_size = 0;                // --hidden-size (required)
  int ffn_hidden_size = 0;            // --ffn-hidden-size; resolved: 4h, or int((4h*2/3)/64)*64 with --swiglu
  int num_attention_heads = 0;        // --num-attention-heads (required)
  bool group_query_attention = false;
  int num_query_groups = 1;           // only used with --group-query-attention
  int kv_channels = 0;                // --kv-channels; resolved: h / np
  int seq_length = 0;                 // --seq-length (required)
  int max_position_embeddings = 0;    // --max-position-embeddings (required, >= seq_length)
  PositionEmbeddingType position_embedding_type = PositionEmbeddingType::kLearnedAbsolute;
  bool use_rotary_position_embeddings = false;  // deprecated alias: resolves to rope
  std::int64_t rotary_base = 10000;
  double rotary_percent = 1.0;
  Normalization normalization = Normalization::kLayerNorm;
  double norm_epsilon = 1e-5;
  bool swiglu = false;
  bool qk_layernorm = false;  // --qk-layernorm
  bool untie_embeddings_and_output_weights = false;
  bool add_bias_linear = true;        // --disable-bias-linear clears it
  bool add_qkv_bias = false;          // --add-qkv-bias; resolved: true whenever add_bias_linear
  double init_method_std = 0.02;
  double attention_dropout = 0.1;
  double hidden_dropout = 0.1;
  int make_vocab_size_divisible_by = 128;
  // Kernel choices (Megatron's --no-*-fusion flags clear them) and the attention back end.
  bool bias_gelu_fusion = true;       // off: exact erf GeLU, unfused
  bool bias_swiglu_fusion = true;
  bool bias_dropout_fusion = true;    // no numeric difference here
  bool masked_softmax_fusion = true;
  bool apply_rope_fusion = true;
  bool gradient_accumulation_fusion = true;
  AttentionBackend attention_backend = AttentionBackend::kAuto;
  // Activation recomputation (6.10).
  bool recompute_activations = false;              // resolves to granularity selective
  std::optional<RecomputeGranularity> recompute_granularity;  // full, selective
  std::optional<RecomputeMethod> recompute_method;            // uniform, block (full only)
  std::optional<int> recompute_num_layers;
  std::optional<std::vector<std::string>> recompute_modules;  // core_attn only in this build
  bool operator==(const ModelArgs&) const = default;
};

// Mixture of experts (Megatron's _add_moe_args; --expert-model-parallel-size is in ParallelArgs).
struct MoeArgs {
  std::optional<int> num_experts;                    // None: a dense model
  // An integer N (layer i is MoE when i % N == 0) or a list expression ("([0]*3+[1]*29)");
  // resolved: the integer, or the list as Megatron prints it ("[0, 0, 0, 1, ...]").
  std::string moe_layer_freq = "1";
  std::optional<int> moe_ffn_hidden_size;            // resolved: --ffn-hidden-size
  std::optional<int> moe_shared_expert_intermediate_size;
  bool moe_shared_expert_overlap = false;
  bool moe_grouped_gemm = false;                     // the experts are always one grouped GEMM here
  LoadBalancing moe_router_load_balancing_type = LoadBalancing::kAuxLoss;
  int moe_router_topk = 2;
  RouterScore moe_router_score_function = RouterScore::kSoftmax;
  bool moe_router_pre_softmax = false;
  std::optional<double> moe_router_topk_scaling_factor;
  std::optional<int> moe_router_num_groups;
  std::optional<int> moe_router_group_topk;
  bool moe_router_enable_expert_bias = false;
  double moe_router_bias_update_rate = 1e-3;
  std::optional<std::string> moe_router_dtype;       // routing runs in fp32 here whatever is given
  double moe_aux_loss_coeff = 0.0;
  std::optional<double> moe_z_loss_coeff;
  std::optional<double> moe_input_jitter_eps;
  bool moe_per_layer_logging = false;
  std::string moe_token_dispatcher_type = "allgather";
  bool moe_permute_fusion = false;
  std::optional<double> moe_expert_capacity_factor;  // None: dropless
  bool moe_pad_expert_input_to_capacity = false;
  TokenDropPolicy moe_token_drop_policy = TokenDropPolicy::kProbs;
  bool operator==(const MoeArgs&) const = default;
};

struct TrainingArgs {
  int micro_batch_size = 0;           // --micro-batch-size (required)
  int global_batch_size = 0;          // --global-batch-size; resolved: mbs * dp
  std::optional<std::int64_t> train_iters;    // exactly one of train_iters / train_samples
  std::optional<std::int64_t> train_samples;
  std::optional<std::int64_t> exit_interval;
  std::optional<std::int64_t> exit_duration_in_mins;  // save and exit once training ran this long
  bool exit_signal_handler = false;   // --exit-signal-handler: on exit_signal, save and exit 0
  std::string exit_signal = "SIGTERM";
  std::int64_t seed = 1234;
  bool operator==(const TrainingArgs&) const = default;
};

struct OptimizerArgs {
  std::string optimizer = "adam";     // AdamW: decoupled weight decay, none on biases and 1-D params
  std::optional<double> lr;           // required
  double min_lr = 0.0;
  double weight_decay = 0.01;
  std::optional<double> start_weight_decay;   // resolved: weight_decay (constant increment style)
  std::optional<double> end_weight_decay;
  WdIncrStyle weight_decay_incr_style = WdIncrStyle::kConstant;
  double clip_grad = 1.0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_eps = 1e-8;
  bool operator==(const OptimizerArgs&) const = default;
};

struct SchedulerArgs {
  LrDecayStyle lr_decay_style = LrDecayStyle::kLinear;
  WsdDecayStyle lr_wsd_decay_style = WsdDecayStyle::kExponential;
  std::optional<std::int64_t> lr_decay_iters;     // None: train_iters (see scheduler_config)
  std::optional<std::int64_t> lr_decay_samples;   // None: train_samples
  std::optional<std::int64_t> lr_wsd_decay_iters;
  std::optional<std::int64_t> lr_wsd_decay_samples;
  std::optional<double> lr_warmup_fraction;
  std::int64_t lr_warmup_iters = 0;
  std::int64_t lr_warmup_samples = 0;
  double lr_warmup_init = 0.0;
  // On resume: the checkpoint's schedule wins, or this command line's (else they must agree).
  bool use_checkpoint_opt_param_scheduler = false;
  bool override_opt_param_scheduler = false;
  bool operator==(const SchedulerArgs&) const = default;
};

struct DataArgs {
  std::optional<std::vector<std::string>> data_path;  // prefixes, optionally "weight prefix" pairs
  std::optional<std::string> split;                   // resolved: "969, 30, 1" with --data-path
  std::optional<std::vector<std::string>> train_data_path;
  std::optional<std::vector<std::string>> valid_data_path;
  std::optional<std::vector<std::string>> test_data_path;
  bool mock_data = false;                             // also used when no data path is given
  std::optional<std::string> data_cache_path;
  std::optional<std::string> dataloader_type;         // resolved: "single"
  int num_workers = 2;
  int num_dataset_builder_threads = 1;
  double mid_level_dataset_surplus = 0.005;
  bool reset_position_ids = false;
  bool reset_attention_mask = false;
  bool eod_mask_loss = false;
  bool create_attention_mask_in_dataloader = true;
  bool operator==(const DataArgs&) const = default;
};

struct TokenizerArgs {
  std::optional<tokenizer::TokenizerType> tokenizer_type;
  std::optional<std::string> vocab_file;
  std::optional<std::string> merge_file;
  std::optional<std::string> tokenizer_model;  // HuggingFace folder, SentencePiece .model, TikTokenizer .json
  std::optional<std::int64_t> vocab_size;      // NullTokenizer's size; TikTokenizer's cut
  std::optional<std::int64_t> padded_vocab_size;  // None: computed, see padded_vocab_size()
  int vocab_extra_ids = 0;                     // SentencePieceTokenizer's <extra_id_i> tokens
  std::optional<std::string> tiktoken_pattern;  // v1 | v2
  std::int64_t tiktoken_num_special_tokens = 1000;
  std::optional<std::vector<std::string>> tiktoken_special_tokens;
  bool operator==(const TokenizerArgs&) const = default;
};

struct LoggingArgs {
  std::int64_t log_interval = 100;
  bool log_throughput = false;
  std::int64_t eval_interval = 1000;  // 1000 as in Megatron core_v0.12 and later releases
  std::int64_t eval_iters = 100;
  std::optional<std::string> tensorboard_dir;  // event files, written by the last rank
  std::int64_t tensorboard_log_interval = 1;
  std::int64_t tensorboard_queue_size = 1000;
  bool log_timers_to_tensorboard = false;      // iteration-time (and throughput with --log-throughput)
  bool log_validation_ppl_to_tensorboard = false;
  bool log_memory_to_tensorboard = false;      // GPU runs: the caching allocator's statistics
  bool log_loss_scale_to_tensorboard = true;   // --no-log-loss-scale-to-tensorboard
  bool log_world_size_to_tensorboard = false;
  // Python's logging level for messages (warnings, notes, INFO:megatron... lines); else
  // MEGATRON_LOGGING_LEVEL, else INFO (20).
  std::optional<std::int64_t> logging_level;
  bool operator==(const LoggingArgs&) const = default;
};

struct CheckpointArgs {
  std::optional<std::string> save;
  std::optional<std::string> load;
  std::optional<std::int64_t> save_interval;   // required with --save
  bool no_save_optim = false;                  // Megatron's default is None; dumped as None
  bool no_save_rng = false;
  bool no_load_optim = false;
  bool no_load_rng = false;
  bool save_tokenizer_assets = true;  // --no-save-tokenizer-assets
  bool finetune = false;
  bool async_save = false;                           // write checkpoints while training goes on
  std::optional<std::string> ckpt_format;            // resolved: "megatron_cpp" or "torch_dist"
  std::optional<std::int64_t> save_retain_interval;  // older checkpoints not a multiple of it are deleted
  std::optional<std::int64_t> keep_last_checkpoints; // ours: keep only the newest K (plus retained ones)
  bool operator==(const CheckpointArgs&) const = default;
};

struct ParallelArgs {
  int tensor_model_parallel_size = 1;
  int pipeline_model_parallel_size = 1;
  int context_parallel_size = 1;
  int expert_model_parallel_size = 1;
  std::optional<int> expert_tensor_parallel_size;  // resolved: --tensor-model-parallel-size
  std::optional<int> num_layers_per_virtual_pipeline_stage;
  std::optional<int> num_virtual_stages_per_pipeline_rank;
  std::optional<int> microbatch_group_size_per_vp_stage;
  std::optional<int> decoder_first_pipeline_num_layers;
  std::optional<int> decoder_last_pipeline_num_layers;
  std::vector<std::string> cp_comm_type{"p2p"};
  bool sequence_parallel = false;               // forced off when tp == 1 (with a warning)
  bool use_distributed_optimizer = false;
  bool overlap_grad_reduce = false;
  std::optional<std::int64_t> ddp_bucket_size;  // elements per gradient bucket; None: Megatron's default
  bool overlap_param_gather = false;
  bool overlap_p2p_comm = true;                 // forced off without a virtual pipeline
  bool use_tp_pp_dp_mapping = false;
  std::string distributed_backend = "nccl";
  int distributed_timeout_minutes = 10;
  int local_rank = 0;                           // default: env LOCAL_RANK, else 0
  // Not flags: from the launcher, and derived.
  int world_size = 1;
  int rank = 0;
  int data_parallel_size = 1;                   // world / (tp * pp * cp)
  bool operator==(const ParallelArgs&) const = default;
};

struct PrecisionArgs {
  bool fp16 = false;
  bool bf16 = false;
  std::optional<double> loss_scale;             // None: dynamic loss scaling with fp16
  double initial_loss_scale = 4294967296.0;     // 2**32
  double min_loss_scale = 1.0;
  double loss_scale_window = 1000.0;
  int hysteresis = 2;
  bool attention_softmax_in_fp32 = false;
  bool apply_query_key_layer_scaling = false;   // also sets attention_softmax_in_fp32
  bool accumulate_allreduce_grads_in_fp32 = false;  // forced on with bf16 unless grad_reduce_in_bf16
  bool grad_reduce_in_bf16 = false;
  bool fp16_lm_cross_entropy = false;
  bool fp32_residual_connection = false;
  std::optional<std::string> fp8;               // --fp8-format
  std::string params_dtype = "torch.float32";   // derived: Megatron's str(args.params_dtype)
  bool operator==(const PrecisionArgs&) const = default;
};

struct Arguments {
  ModelArgs model;
  MoeArgs moe;
  TrainingArgs training;
  OptimizerArgs optimizer;
  SchedulerArgs scheduler;
  DataArgs data;
  TokenizerArgs tokenizer;
  LoggingArgs logging;
  CheckpointArgs checkpoint;
  ParallelArgs parallel;
  PrecisionArgs precision;
  bool operator==(const Arguments&) const = default;
};

struct ParseOptions {
  int world_size = 1;   // from the launcher (Megatron reads WORLD_SIZE / RANK)
  int rank = 0;
  std::optional<int> local_rank_env;  // LOCAL_RANK, the default of --local-rank
  // Receives the lines Megatron prints before the argument dump, in its order: the world-size
  // line, warnings, "setting global batch size to N", "using torch.float32 for parameters ...".
  std::vector<std::string>* messages = nullptr;
};

// Parses and resolves a command line (argv[0] is the program name). Throws megatron::Error listing
// every problem: unknown flags (naming the nearest known flag), malformed values, missing
// required flags, inconsistent combinations (Megatron's validate_args and the checks its
// scheduler, microbatch calculator and model make later), and values this build cannot run yet.
Arguments parse_arguments(int argc, const char* const* argv, const ParseOptions& options = {});
Arguments parse_arguments(const std::vector<std::string>& args, const ParseOptions& options = {});

// True when the command line asks for --help / -h; help_text() is the usage to print then.
bool help_requested(const std::vector<std::string>& args);
std::string help_text();

// Megatron's "using world size: ..." line (spec 5.3 item 1).
std::string format_world_size_line(const Arguments& args);

// The "------------------------ arguments ------------------------" block, newline-terminated
// lines sorted case-insensitively: "  " + name + " " + '.' * (48 - len(name)) + " " + str(value).
std::string format_argument_dump(const Arguments& args);

// The resolved configuration as JSON text (an object keyed by the dump's names) and back.
// from_json restores every field it names (others keep their defaults) and throws megatron::Error
// listing unknown names and wrongly typed values; it does not validate the configuration again.
std::string to_json(const Arguments& args);
Arguments from_json(std::string_view text);

// Values Megatron derives after the dump, resolved the same way.

// The vocabulary padding a run asks for, known before the tokenizer is built.
struct VocabPlan {
  std::optional<std::int64_t> padded_vocab_size;  // --padded-vocab-size
  int make_vocab_size_divisible_by = 128;
  int tp = 1;
  // The model's vocabulary for a tokenizer of `tokenizer_vocab_size` tokens (spec 10.5):
  // --padded-vocab-size when given, else model::ModelConfig::padded_vocab_size_for(vocab,
  // --make-vocab-size-divisible-by, TP). Throws megatron::Error naming --padded-vocab-size when it
  // is smaller than the tokenizer's vocabulary or not divisible by the tensor-parallel size.
  std::int64_t padded(std::int64_t tokenizer_vocab_size) const;
};
VocabPlan vocab_plan(const Arguments& args);
inline std::int64_t padded_vocab_size(const Arguments& args, std::int64_t tokenizer_vocab_size) {
  return vocab_plan(args).padded(tokenizer_vocab_size);
}
// " > padded vocab (size: 50257) with 47 dummy tokens (new size: 50304)"
std::string format_padded_vocab_line(std::int64_t vocab_size, std::int64_t padded);

// gbs / (mbs * dp), constant (no batch-size ramp-up in this build).
int num_microbatches(const Arguments& args);

// The model the resolved flags describe (ModelConfig::from_arguments of their JSON: the model's
// one field table), its padded vocabulary left to the VocabPlan; and its mixture-of-experts part
// (num_experts 0 without --num-experts).
model::ModelConfig model_config(const Arguments& args);
inline model::MoeConfig moe_config(const Arguments& args) { return model_config(args).moe; }
// The number of iterations to train: --train-iters, or train_samples // gbs.
std::int64_t total_train_iters(const Arguments& args);

// The learning-rate and weight-decay schedule in Megatron's units (samples), as
// get_optimizer_param_scheduler computes it: decay over lr_decay_iters * gbs (default
// train_iters) or lr_decay_samples (default train_samples); warmup from the fraction of the decay
// steps or the iters/samples; the weight decay from --start/--end-weight-decay over the run.
optim::SchedulerConfig scheduler_config(const Arguments& args);

}  // namespace megatron::train
