// GptModel (see gpt_model.h).
#include "megatron/model/gpt_model.h"

#include <algorithm>

#include "megatron/core/check.h"
#include "megatron/kernels/ops.h"
#include "megatron/model/recompute.h"

namespace megatron::model {
namespace {

const parallel::ParallelState& state_of(const parallel::ParallelContext& pc) {
  MEGATRON_ASSERT(pc.state != nullptr && pc.tp != nullptr, "the parallel context is not set up");
  return *pc.state;
}

// Every problem of the configuration under this layout, one message each.
std::vector<std::string> layout_problems(const ModelConfig& c, const parallel::ParallelContext& pc) {
  std::vector<std::string> problems = c.validate();
  const int tp = parallel::tp_size(pc);
  auto need_divisible = [&](std::int64_t value, const char* what) {
    if (value % tp != 0) {
      problems.push_back(str_cat(what, " (", value, ") must be divisible by --tensor-model-parallel-size (", tp, ")"));
    }
  };
  need_divisible(c.num_attention_heads, "--num-attention-heads");
  need_divisible(c.num_query_groups, "--num-query-groups");
  need_divisible(c.ffn_hidden_size, "--ffn-hidden-size");
  need_divisible(c.padded_vocab_size, "the padded vocabulary size");
  if (c.sequence_parallel) need_divisible(c.seq_length, "--seq-length with --sequence-parallel");
  return problems;
}

constexpr const char* kWordEmbeddings = "embedding.word_embeddings.";
constexpr const char* kPositionEmbeddings = "embedding.position_embeddings.weight";

// The device and dtype of `options`, defaults filled in (CPU, fp32).
at::TensorOptions parameter_options(const at::TensorOptions& options) {
  return at::TensorOptions().dtype(options.dtype()).device(options.device());
}

// The even split of the layers over the pipeline stages, one chunk per stage.
StageSpec default_stage(const ModelConfig& config, const parallel::ParallelContext& pc) {
  const parallel::ParallelState& ps = state_of(pc);
  MEGATRON_CHECK(config.num_layers % ps.pp() == 0, "--num-layers (", config.num_layers,
                 ") must be divisible by --pipeline-model-parallel-size (", ps.pp(), ")");
  const int stage_layers = config.num_layers / ps.pp();
  return {stage_layers * ps.pp_rank(), stage_layers, ps.is_first_stage(), ps.is_last_stage()};
}

}  // namespace

GptModel::GptModel(const ModelConfig& config, const parallel::ParallelContext& pc, const parallel::ParameterInit& init,
                   const at::TensorOptions& options)
    : GptModel(config, pc, init, default_stage(config, pc), options) {}

GptModel::GptModel(const ModelConfig& config, const parallel::ParallelContext& pc, const parallel::ParameterInit& init,
                   const StageSpec& stage, const at::TensorOptions& options)
    : config_(config),
      pc_(&pc),
      sequence_parallel_(config.sequence_parallel && parallel::tp_size(pc) > 1),
      pre_process_(stage.pre_process),
      post_process_(stage.post_process) {
  const auto problems = layout_problems(config, pc);
  throw_if_problems("invalid model configuration", problems, ProblemHeading::kList);
  MEGATRON_CHECK(stage.first_layer >= 0 && stage.num_layers >= 0 && stage.first_layer + stage.num_layers <= config.num_layers,
                 "internal error: layers [", stage.first_layer, ", ", stage.first_layer + stage.num_layers,
                 ") of a ", config.num_layers, "-layer model");
  const auto opts = parameter_options(options);
  const double std = config.init_method_std;
  const std::int64_t vocab = config.padded_vocab_size, h = config.hidden_size;
  // Tied embeddings split over stages: the last chunk keeps its own copy of the embedding, drawn
  // from the embedding's stream.
  const bool tied = !config.untie_embeddings_and_output_weights;
  const bool shared = tied && pre_process_ != post_process_;
  const parallel::TensorParallelLayout vocab_rows{0, 1, false, shared};
  if (pre_process_) {
    const bool learned_positions = config.position_embedding == PositionEmbedding::kLearnedAbsolute;
    word_embeddings_ = std::make_unique<parallel::VocabParallelEmbedding>(
        vocab, config.hidden_size, std, init.scope(kWordEmbeddings), pc,
        /*reduce_scatter_embeddings=*/sequence_parallel_ && !learned_positions, opts);
    word_embeddings_->collect(kWordEmbeddings, parameters_, shared);
    if (learned_positions) {
      position_embeddings_ = init.normal(kPositionEmbeddings, {config.max_position_embeddings, h}, std,
                                         parallel::TensorParallelLayout{}, pc, opts);
      parameters_.add(kPositionEmbeddings, position_embeddings_);
    }
  }
  // Layers under their global numbers: the streams do not depend on the split.
  layers_.reserve(static_cast<std::size_t>(stage.num_layers));
  for (int i = 0; i < stage.num_layers; ++i) {
    const std::string global = "decoder.layers." + std::to_string(stage.first_layer + i) + ".";
    layers_.emplace_back(config, init.scope(global), pc, sequence_parallel_, opts, stage.first_layer + i);
    layers_.back().collect("decoder.layers." + std::to_string(i) + ".", parameters_);
  }
  if (post_process_) {
    final_layernorm_ = std::make_unique<Norm>(config, sequence_parallel_, opts);
    final_layernorm_->collect("decoder.final_layernorm.", parameters_);
    if (!tied || !pre_process_) {
      const parallel::ParameterInit output = tied ? init.scope(kWordEmbeddings) : init.scope("output_layer.");
      output_weight_ = output.normal("weight", {vocab, h}, std, vocab_rows, pc, opts);
      parameters_.add("output_layer.weight", output_weight_, vocab_rows);
    } else {
      output_weight_ = word_embeddings_->weight();
    }
  }
}

at::Tensor GptModel::embed(const at::Tensor& tokens, const at::Tensor& position_ids, const ForwardContext& ctx) const {
  at::Tensor emb = word_embeddings_->forward(tokens);  // [b, s, h]; [s/tp, b, h] if reduce-scattered
  if (position_embeddings_.defined()) {
    emb = (emb + at::embedding(position_embeddings_, position_ids)).transpose(0, 1).contiguous();  // [s, b, h]
    if (sequence_parallel_) emb = parallel::scatter_to_sequence_parallel_region(emb, *pc_);       // [s/tp, b, h]
  } else if (!sequence_parallel_) {
    emb = emb.transpose(0, 1).contiguous();  // [s, b, h]
  }
  return dropout(emb, config_.hidden_dropout, ctx, ctx.hidden_gen(sequence_parallel_));
}

at::Tensor GptModel::run_layers(const at::Tensor& input, const at::Tensor& mask, const ForwardContext& ctx) const {
  const int n = static_cast<int>(layers_.size());
  auto run = [this, mask, ctx](int begin, int end) {
    return [this, mask, ctx, begin, end](const at::Tensor& x) {
      at::Tensor h = x;
      for (int i = begin; i < end; ++i) h = layers_[static_cast<std::size_t>(i)].forward(h, mask, ctx);
      return h;
    };
  };
  const bool full = config_.recompute_granularity == RecomputeGranularity::kFull && ctx.training;
  if (!full) return run(0, n)(input);
  const int per = std::max(1, config_.recompute_num_layers);
  const std::vector<at::Generator*> streams{ctx.dropout_gen, ctx.model_parallel_gen};
  at::Tensor hidden = input;
  if (config_.recompute_method == RecomputeMethod::kUniform) {
    // Megatron's uniform method: the layers in chunks of N, each chunk's input kept, its inside recomputed.
    for (int i = 0; i < n; i += per) hidden = recompute(run(i, std::min(n, i + per)), hidden, streams);
  } else {
    // The block method: the first N layers of this chunk recomputed one by one, the rest kept.
    for (int i = 0; i < n; ++i) hidden = i < per ? recompute(run(i, i + 1), hidden, streams) : run(i, i + 1)(hidden);
  }
  return hidden;
}

at::Tensor GptModel::forward(const at::Tensor& tokens, const at::Tensor& position_ids, const at::Tensor& mask,
                             const at::Tensor& labels, const ForwardContext& ctx) const {
  at::Tensor hidden;  // [s, b, h], or [s/tp, b, h] under sequence parallelism
  if (pre_process_) {
    hidden = embed(tokens, position_ids, ctx);
  } else {
    MEGATRON_CHECK(input_tensor_.defined(), "internal error: stage ", pc_->state->pp_rank(), " has no input tensor");
    hidden = input_tensor_;
  }
  hidden = run_layers(hidden, mask, ctx);
  if (!post_process_) return hidden;
  hidden = final_layernorm_->forward(hidden);
  // [s, b, V/tp]: the output layer gathers the sequence under sequence parallelism.
  const at::Tensor logits =
      parallel::column_parallel_linear(hidden, output_weight_, at::Tensor(), *pc_, sequence_parallel_, false);
  if (!labels.defined()) return logits.transpose(0, 1).contiguous();  // [b, s, V/tp]
  return parallel::vocab_parallel_cross_entropy(logits, labels.transpose(0, 1), *pc_).transpose(0, 1);
}

at::Tensor GptModel::forward_cached(const at::Tensor& tokens, KvCache& cache) const {
  MEGATRON_CHECK(pre_process_ && post_process_ && pc_->state->tp() == 1,
                 "cached inference needs the whole model in one process (one stage, tensor-parallel size 1)");
  const std::int64_t past = cache.length();
  const std::int64_t s = tokens.size(1);
  MEGATRON_CHECK(!position_embeddings_.defined() || past + s <= config_.max_position_embeddings, "position ",
                 past + s - 1, " is past --max-position-embeddings ", config_.max_position_embeddings);
  cache.keys.resize(layers_.size());
  cache.values.resize(layers_.size());
  const at::Tensor positions =
      at::arange(past, past + s, at::TensorOptions().dtype(at::kLong).device(tokens.device())).unsqueeze(0);
  at::Tensor hidden = embed(tokens, positions.expand({tokens.size(0), s}), ForwardContext{false});  // [s, b, h]
  for (std::size_t i = 0; i < layers_.size(); ++i) hidden = layers_[i].forward_cached(hidden, cache.keys[i], cache.values[i]);
  hidden = final_layernorm_->forward(hidden);
  return kernels::ops::matmul(hidden, output_weight_.t()).transpose(0, 1).contiguous();  // [b, s, V]
}

NamedTensors GptModel::checkpoint_tensors() const {
  NamedTensors out = parameters_.named;
  out.insert(out.end(), parameters_.buffers.begin(), parameters_.buffers.end());
  return out;
}

std::vector<parallel::TensorParallelLayout> GptModel::checkpoint_layouts() const {
  std::vector<parallel::TensorParallelLayout> out = parameters_.layouts;
  out.resize(out.size() + parameters_.buffers.size());
  return out;
}

std::vector<const MoeLayer*> GptModel::moe_layers() const {
  std::vector<const MoeLayer*> out;
  for (const TransformerLayer& layer : layers_) {
    if (const MoeLayer* moe = layer.moe()) out.push_back(moe);
  }
  return out;
}

}  // namespace megatron::model
