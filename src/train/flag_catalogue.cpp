// Megatron flags (spec section 6) that this build knows by name but does not implement, and those
// it accepts and ignores because they only pick kernels or are deprecated no-ops in Megatron, and
// flags of older Megatron versions that the guides still use.
#include "argument_fields.h"

namespace megatron::train::detail {

namespace {

using K = FlagKind;

constexpr std::string_view kWandb = "Weights & Biases logging is not implemented";
constexpr std::string_view kRecompute = "an older Megatron name: use --recompute-granularity, --recompute-method and --recompute-num-layers";
constexpr std::string_view kCkpt = "checkpoints use this project's own format in Megatron's folder layout (see docs)";

constexpr CataloguedFlag kUnsupported[] = {
    // Model shape (6.1).
    {"--rotary-interleaved", K::kStoreTrue, "interleaved rotary pairs are not implemented yet"},
    {"--rotary-seq-len-interpolation-factor", K::kValue, "rotary interpolation is not implemented yet"},
    {"--use-rope-scaling", K::kStoreTrue, "Llama-3 rope scaling is not implemented yet"},
    {"--rope-scaling-factor", K::kValue, "Llama-3 rope scaling is not implemented yet"},
    {"--apply-layernorm-1p", K::kStoreTrue, "zero-centred LayerNorm gamma is not implemented yet"},
    {"--squared-relu", K::kStoreTrue, "only GeLU and SwiGLU (--swiglu) MLPs are implemented"},
    {"--quick-geglu", K::kStoreTrue, "only GeLU and SwiGLU (--swiglu) MLPs are implemented"},
    {"--openai-gelu", K::kStoreTrue, "only the exact GeLU is implemented"},
    {"--embedding-init-method-std", K::kValue, "a separate embedding initialisation is not implemented yet"},
    {"--init-method-xavier-uniform", K::kStoreTrue, "only normal initialisation (--init-method-std) is implemented"},
    {"--apply-residual-connection-post-layernorm", K::kStoreTrue, "only the pre-LayerNorm residual order is implemented"},
    {"--transformer-impl", K::kValue, "this build has its own implementation of Megatron's local layer spec"},
    {"--no-position-embedding", K::kStoreTrue, "deprecated in Megatron; use --position-embedding-type"},
    // Batch and iterations (6.2).
    {"--rampup-batch-size", K::kList, "batch-size ramp-up is not implemented (deprecated in Megatron)"},
    {"--step-batch-size-schedule", K::kValue, "batch-size schedules are not implemented yet"},
    {"--decrease-batch-size-if-needed", K::kStoreTrue, "batch-size decrease is not implemented"},
    {"--skip-train", K::kStoreTrue, "evaluation-only runs are not implemented yet"},
    {"--full-validation", K::kStoreTrue, "full validation is not implemented yet; use --eval-iters"},
    // Optimizer and schedules (6.3).
    {"--sgd-momentum", K::kValue, "only --optimizer adam is implemented"},
    {"--decoupled-lr", K::kValue, "a separate embedding/output learning rate is not implemented yet"},
    {"--decoupled-min-lr", K::kValue, "a separate embedding/output learning rate is not implemented yet"},
    // Data (6.6).
    {"--data-args-path", K::kValue, "give the datasets with --data-path"},
    {"--per-split-data-args-path", K::kValue, "give the datasets with --train-data-path, --valid-data-path, --test-data-path"},
    {"--no-mmap-bin-files", K::kStoreTrue, "datasets are always memory-mapped"},
    // Checkpointing (6.7).
    {"--pretrained-checkpoint", K::kValue, "use --load with --finetune"},
    {"--ckpt-step", K::kValue, "loading a chosen iteration is not implemented yet; --load reads the latest"},
    {"--use-checkpoint-args", K::kStoreTrue, "taking model arguments from a checkpoint is not implemented yet"},
    {"--exit-on-missing-checkpoint", K::kStoreTrue, "not implemented yet"},
    {"--ckpt-format", K::kValue, kCkpt},
    {"--auto-detect-ckpt-format", K::kStoreTrue, kCkpt},
    {"--no-ckpt-fully-parallel-save", K::kStoreTrue, kCkpt},
    {"--ckpt-fully-parallel-load", K::kStoreTrue, kCkpt},
    {"--non-persistent-save-interval", K::kValue, "non-persistent checkpoints are not implemented"},
    {"--non-persistent-ckpt-type", K::kValue, "non-persistent checkpoints are not implemented"},
    // Tokenizer (6.8).
    {"--tokenizer-special-tokens", K::kList, "special tokens are not implemented yet"},
    {"--null-tokenizer-eod-id", K::kValue, "NullTokenizer's end-of-document id is fixed in this build"},
    {"--null-tokenizer-pad-id", K::kValue, "NullTokenizer's pad id is fixed in this build"},
    // Logging (6.9).
    {"--log-params-norm", K::kStoreTrue, "parameter-norm logging is not implemented yet"},
    {"--log-num-zeros-in-grad", K::kStoreTrue, "zero-gradient counting is not implemented yet"},
    {"--log-progress", K::kStoreTrue, "progress.txt logging is not implemented yet"},
    {"--log-energy", K::kStoreTrue, "energy logging is not implemented"},
    {"--timing-log-level", K::kValue, "timer levels are not implemented yet"},
    {"--timing-log-option", K::kValue, "timer levels are not implemented yet"},
    {"--wandb-project", K::kValue, kWandb},
    {"--wandb-exp-name", K::kValue, kWandb},
    {"--wandb-save-dir", K::kValue, kWandb},
    {"--wandb-entity", K::kValue, kWandb},
    {"--data-parallel-random-init", K::kStoreTrue, "per-replica initialisation is not implemented"},
    // Activation recomputation (6.10).
    {"--distribute-saved-activations", K::kStoreTrue, "distributing saved activations over tensor-parallel ranks is not implemented"},
    // Older Megatron versions' names for recomputation and TensorBoard options.
    {"--checkpoint-activations", K::kStoreTrue, kRecompute},
    {"--checkpoint-num-layers", K::kValue, kRecompute},
    {"--activations-checkpoint-method", K::kValue, kRecompute},
    {"--activations-checkpoint-num-layers", K::kValue, kRecompute},
    {"--log-batch-size-to-tensorboard", K::kStoreTrue, "an older Megatron flag: the batch size is always written to TensorBoard"},
};

constexpr CataloguedFlag kIgnored[] = {
    {"--use-mcore-models", K::kStoreTrue, "deprecated and ignored by Megatron as well"},
    {"--no-async-tensor-model-parallel-allreduce", K::kStoreTrue, "deprecated and ignored by Megatron as well"},
    {"--use-flash-attn", K::kStoreTrue, kKernelChoice},
    {"--no-persist-layer-norm", K::kStoreTrue, kKernelChoice},
    {"--cross-entropy-loss-fusion", K::kStoreTrue, kKernelChoice},
    {"--use-cpu-initialization", K::kStoreTrue, "every layout here starts from the same weights, each rank drawing its shard on its device"},
};

constexpr LegacyFlag kLegacy[] = {
    {"--data-impl", "lazy cached mmap infer", "mmap infer", "datasets are always read as Megatron's mmap .bin/.idx",
     "only Megatron's mmap .bin/.idx datasets are read (Megatron dropped the lazy and cached formats)"},
    {"--DDP-impl", "local torch", "local torch", "data-parallel gradients are reduced by this build's own buffers", ""},
    {"--no-contiguous-buffers-in-local-ddp", "", "", "gradient buffers are always contiguous", ""},
    {"--no-scaled-masked-softmax-fusion", "", "", "this build picks its own kernels", ""},
    {"--scaled-upper-triang-masked-softmax-fusion", "", "", "this build picks its own kernels", ""},
    {"--no-query-key-layer-scaling", "", "", "query-key layer scaling is off unless --apply-query-key-layer-scaling", ""},
};

}  // namespace

std::span<const CataloguedFlag> unsupported_flags() { return kUnsupported; }
std::span<const CataloguedFlag> ignored_flags() { return kIgnored; }
std::span<const LegacyFlag> legacy_flags() { return kLegacy; }

}  // namespace megatron::train::detail
