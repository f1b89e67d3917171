// The GPT model's shape and numerics, resolved (no "None"): what every module of the model reads.
// Built from the command line by the trainer or from a HuggingFace config by the importer (with
// derive_defaults() filling Megatron's derived sizes); written into checkpoints as JSON under
// Megatron's argument names; compared on load. No LibTorch here (the flag parser uses it too).
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <vector>

#include "megatron/core/enum_names.h"
#include "megatron/model/moe_config.h"

namespace megatron::model {

enum class PositionEmbedding { kLearnedAbsolute, kRope };
enum class Normalization { kLayerNorm, kRmsNorm };
// --attention-backend, Megatron's names. flash and fused run LibTorch's scaled-dot-product
// attention restricted to its FlashAttention-2 or cuDNN back end (on CPU: LibTorch's CPU kernel);
// unfused and local run the explicit path (QK^T, the scaled causal softmax op, dropout, PV); auto
// is scaled-dot-product attention with LibTorch's choice on GPU and the explicit path on CPU.
// An explicit attention mask (--reset-attention-mask) always takes the explicit path.
enum class AttentionBackend { kAuto, kFlash, kFused, kUnfused, kLocal };
// --recompute-granularity: selective recomputes the core attention (Megatron's default module
// core_attn), full whole layers, chosen by --recompute-method and --recompute-num-layers.
enum class RecomputeGranularity { kNone, kSelective, kFull };
enum class RecomputeMethod { kUniform, kBlock };

// Megatron's spellings (flag choices, argument names in JSON), in Megatron's choice order. A
// granularity of kNone has no name: Megatron's None.
inline constexpr std::array<EnumName<PositionEmbedding>, 2> kPositionEmbeddingNames{{
    {PositionEmbedding::kLearnedAbsolute, "learned_absolute"}, {PositionEmbedding::kRope, "rope"}}};
inline constexpr std::array<EnumName<Normalization>, 2> kNormalizationNames{{
    {Normalization::kLayerNorm, "LayerNorm"}, {Normalization::kRmsNorm, "RMSNorm"}}};
inline constexpr std::array<EnumName<AttentionBackend>, 5> kAttentionBackendNames{{
    {AttentionBackend::kFlash, "flash"}, {AttentionBackend::kFused, "fused"}, {AttentionBackend::kUnfused, "unfused"},
    {AttentionBackend::kLocal, "local"}, {AttentionBackend::kAuto, "auto"}}};
inline constexpr std::array<EnumName<RecomputeGranularity>, 2> kRecomputeGranularityNames{{
    {RecomputeGranularity::kFull, "full"}, {RecomputeGranularity::kSelective, "selective"}}};
inline constexpr std::array<EnumName<RecomputeMethod>, 2> kRecomputeMethodNames{{
    {RecomputeMethod::kUniform, "uniform"}, {RecomputeMethod::kBlock, "block"}}};
inline std::span<const EnumName<PositionEmbedding>> enum_names(PositionEmbedding) { return kPositionEmbeddingNames; }
inline std::span<const EnumName<Normalization>> enum_names(Normalization) { return kNormalizationNames; }
inline std::span<const EnumName<AttentionBackend>> enum_names(AttentionBackend) { return kAttentionBackendNames; }
inline std::span<const EnumName<RecomputeGranularity>> enum_names(RecomputeGranularity) { return kRecomputeGranularityNames; }
inline std::span<const EnumName<RecomputeMethod>> enum_names(RecomputeMethod) { return kRecomputeMethodNames; }

struct ModelConfig {
  int num_layers = 2;
  int hidden_size = 64;
  int ffn_hidden_size = 256;
  int num_attention_heads = 4;
  int num_query_groups = 4;  // == num_attention_heads without grouped-query attention
  int kv_channels = 16;      // head dim
  int seq_length = 32;
  int max_position_embeddings = 32;
  PositionEmbedding position_embedding = PositionEmbedding::kLearnedAbsolute;
  double rotary_base = 10000.0;
  double rotary_percent = 1.0;
  bool rotary_interleaved = false;
  Normalization normalization = Normalization::kLayerNorm;
  double norm_epsilon = 1e-5;
  bool swiglu = false;
  // --qk-layernorm: the queries and keys normalized per head (over kv_channels) before RoPE.
  bool qk_layernorm = false;
  bool untie_embeddings_and_output_weights = false;
  bool add_bias_linear = true;
  double init_method_std = 0.02;
  double attention_dropout = 0.1;
  double hidden_dropout = 0.1;
  std::int64_t padded_vocab_size = 128;
  MoeConfig moe;  // mixture of experts (num_experts 0: none)
  // --sequence-parallel: between the tensor-parallel regions activations are [s/tp, b, h]; norms
  // and hidden dropout see only this rank's tokens. Ignored at TP size 1 (as Megatron does).
  bool sequence_parallel = false;

  // How the model computes, not what it is (not compared on load).
  bool bias_activation_fusion = true;  // off: --no-bias-gelu-fusion (exact erf GeLU) / --no-bias-swiglu-fusion
  bool masked_softmax_fusion = true;   // off: --no-masked-softmax-fusion (plain ATen softmax)
  bool apply_rope_fusion = true;       // off: --no-rope-fusion (plain ATen rotation)
  AttentionBackend attention_backend = AttentionBackend::kAuto;
  bool cp_all_gather = false;  // --cp-comm-type all_gather (else the p2p ring) under context parallelism
  RecomputeGranularity recompute_granularity = RecomputeGranularity::kNone;
  RecomputeMethod recompute_method = RecomputeMethod::kUniform;
  int recompute_num_layers = 1;

  // Every inconsistency (heads not divisible by groups, rotary dim odd, ...), one message each.
  std::vector<std::string> validate() const;
  // Megatron's values for the sizes left at 0 (TransformerConfig.__post_init__): the MLP's
  // default_ffn_hidden_size, heads of hidden / heads channels, one query group per head.
  void derive_defaults();
  // 4h, or with SwiGLU int(4h * 2/3 / 64) * 64 (Megatron's rule, keeping the parameter count).
  static std::int64_t default_ffn_hidden_size(std::int64_t hidden_size, bool swiglu);
  // Megatron's vocabulary padding: `vocab` rounded up to a multiple of divisible_by x tp.
  static std::int64_t padded_vocab_size_for(std::int64_t vocab, int divisible_by, int tp);

  // Every member under Megatron's argument name (enums as its choices: "learned_absolute",
  // "RMSNorm", "selective", ...), and back; absent keys keep the member defaults, a key of the
  // wrong type is an error naming it. One field table (model_config_fields.cpp) serves these,
  // from_arguments, flags and shape_differences_from.
  nlohmann::json to_json() const;
  static ModelConfig from_json(const nlohmann::json& j);
  // The model Megatron's arguments describe (argparse dest names: megatron_train's resolved flags,
  // or the arguments an older checkpoint saved without a "model" object): the same keys, None
  // (null) keeping the default, with Megatron's derivations (query groups only with
  // --group-query-attention, the fusion flag of the MLP's activation, experts' settings only with
  // experts).
  static ModelConfig from_arguments(const nlohmann::json& arguments);
  // The megatron_train flags that build this model: the sizes, dropout, init and norm epsilon
  // always, every other setting of what the model is (not how it computes) where it is not
  // Megatron's default, and --padded-vocab-size.
  std::vector<std::string> flags() const;
  // The members that shape the parameters (sizes, norms, biases, vocabulary, tying) where `saved`
  // and this config differ: "hidden_size: checkpoint 32, command line 48". A size no tensor of
  // either model depends on is not compared (the dense MLP size when every layer has experts, the
  // position table's length with rotary positions), as Megatron's check_checkpoint_args does not.
  std::vector<std::string> shape_differences_from(const ModelConfig& saved) const;
  // The other members a flag sets where they differ, as this config takes them: "rotary_base
  // 500000 (the checkpoint's run had 10000)"; a resume follows the command line in these.
  std::vector<std::string> setting_differences_from(const ModelConfig& saved) const;
  // Rows of the fused QKV weight: (heads + 2 * groups) * kv_channels.
  int qkv_size() const { return (num_attention_heads + 2 * num_query_groups) * kv_channels; }
  // Channels of each head that RoPE rotates.
  int rotary_dim() const { return static_cast<int>(kv_channels * rotary_percent); }
  // Dense parameters of the whole model (embeddings and output layer included).
  std::int64_t num_parameters() const;
  // The parameters one rank of `tp` tensor-parallel ranks holds of one pipeline chunk: `layers`
  // transformer layers, the embeddings when the chunk is the model's first, the final norm and
  // output layer when it is the last (tied weights: the output layer is the word embedding, held
  // a second time when the last chunk is not also the first). Split weights count 1/tp, norms and
  // row-parallel biases whole. With MoE layers, each counts its router, experts (no biases) and
  // shared expert instead of the MLP; `layers` short of the whole model holds its share of them.
  // Under expert parallelism a rank holds 1/ep of the experts, each split over the expert TP size
  // `etp` (0: tp). Saturates at INT64_MAX instead of wrapping.
  std::int64_t num_parameters(int tp, std::int64_t layers, bool first_chunk, bool last_chunk, int ep = 1,
                              int etp = 0) const;
  // Of those, the experts' weights (0 for a dense model): what the expert-data-parallel group
  // reduces and the distributed optimizer shards over it.
  std::int64_t num_expert_parameters(int tp, std::int64_t layers, int ep = 1, int etp = 0) const;
};

}  // namespace megatron::model
