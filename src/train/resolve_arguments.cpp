// Megatron's validate_args for the implemented flags, part one: the parallel layout, batch size,
// precision, iteration counts and model shape, plus the checks Megatron's microbatch calculator and
// TransformerConfig make later. Phases run in Megatron's order so start-up messages keep its order.

#include <algorithm>
#include <cstdint>
#include <limits>

#include "megatron/core/check.h"
#include "megatron/core/exit_signal.h"
#include "megatron/core/strings.h"
#include "megatron/model/model_config.h"
#include "resolve_arguments.h"

#include "megatron/parallel/pipeline_layout.h"
#include "megatron/parallel/pipeline_schedule.h"

namespace megatron::train::detail {

std::string Resolver::num(double value) { return python_float_repr(value); }

void Resolver::run() {
  parallel();
  data_sources();
  batch_size();
  pipeline();
  precision();
  iterations();
  model();
  moe();
  optimizer();
  tokenizer();
  logging_and_checkpoints();
  if (a_.parallel.tensor_model_parallel_size == 1 && a_.parallel.sequence_parallel) {
    state_.messages.push_back("WARNING: Disabling sequence parallelism because tensor model parallelism is disabled");
    a_.parallel.sequence_parallel = false;
  }
}

void Resolver::parallel() {
  auto& p = a_.parallel;
  p.world_size = options_.world_size;
  p.rank = options_.rank;
  if (!given("local_rank")) p.local_rank = options_.local_rank_env.value_or(0);
  const bool tp_ok = positive("--tensor-model-parallel-size", "tensor_model_parallel_size", p.tensor_model_parallel_size);
  const bool pp_ok = positive("--pipeline-model-parallel-size", "pipeline_model_parallel_size", p.pipeline_model_parallel_size);
  const bool cp_ok = positive("--context-parallel-size", "context_parallel_size", p.context_parallel_size);
  positive("--expert-model-parallel-size", "expert_model_parallel_size", p.expert_model_parallel_size);
  if (cp_ok && p.context_parallel_size > 1) {
    for (const std::string& type : p.cp_comm_type) {
      unsupported(type != "p2p" && type != "all_gather", "--cp-comm-type " + type,
                  "context-parallel attention here is p2p (the ring) or all_gather");
    }
    unsupported(p.cp_comm_type.size() > 1, "--cp-comm-type with one type per layer",
                "give one type (p2p or all_gather) for every layer");
  }
  const bool sizes_ok = tp_ok && pp_ok && cp_ok;
  check(!(p.num_layers_per_virtual_pipeline_stage && p.num_virtual_stages_per_pipeline_rank),
        "--num-layers-per-virtual-pipeline-stage and --num-virtual-stages-per-pipeline-rank cannot be set together");
  if (p.num_layers_per_virtual_pipeline_stage) {
    positive("--num-layers-per-virtual-pipeline-stage", "num_layers_per_virtual_pipeline_stage",
             *p.num_layers_per_virtual_pipeline_stage);
  }
  if (p.num_virtual_stages_per_pipeline_rank) {
    positive("--num-virtual-stages-per-pipeline-rank", "num_virtual_stages_per_pipeline_rank",
             *p.num_virtual_stages_per_pipeline_rank);
  }
  const bool virtual_pipeline = p.num_layers_per_virtual_pipeline_stage || p.num_virtual_stages_per_pipeline_rank;
  if (virtual_pipeline && pp_ok) {
    if (p.overlap_p2p_comm) {
      check(p.pipeline_model_parallel_size > 1,
            "When interleaved schedule is used, pipeline-model-parallel size should be greater than 1");
    } else {
      check(p.pipeline_model_parallel_size > 2,
            "When interleaved schedule is used and p2p communication overlap is disabled, pipeline-model-parallel "
            "size should be greater than 2 to avoid having multiple p2p sends and recvs between same 2 ranks per "
            "communication batch");
    }
  }
  if (p.overlap_param_gather) {
    check(p.use_distributed_optimizer, "--overlap-param-gather only supported with distributed optimizer (--use-distributed-optimizer)");
    check(p.overlap_grad_reduce, "--overlap-param-gather needs --overlap-grad-reduce");
    state_.messages.push_back(
        "WARNING: --overlap-param-gather: the updated parameters are all-gathered at the end of the optimizer step, "
        "not overlapped with the next forward pass (same results, no overlap yet)");
  }
  if (!virtual_pipeline) p.overlap_p2p_comm = false;  // no virtual pipeline: Megatron turns overlap off
  positive("--distributed-timeout-minutes", "distributed_timeout_minutes", p.distributed_timeout_minutes);
  if (p.ddp_bucket_size) positive("--ddp-bucket-size", "ddp_bucket_size", *p.ddp_bucket_size);

  // Later checks that involve the sizes run only when the sizes themselves are usable.
  parallel_ok_ = sizes_ok;
  const int model_size = sizes_ok ? p.tensor_model_parallel_size * p.pipeline_model_parallel_size * p.context_parallel_size : 1;
  if (sizes_ok && p.world_size % model_size != 0) {
    problem("world size (" + num(std::int64_t{p.world_size}) + ") is not divisible by tensor x pipeline x context parallel sizes (" +
            num(std::int64_t{model_size}) + "); launch a multiple of that many processes");
    parallel_ok_ = false;
  }
  p.data_parallel_size = std::max(1, p.world_size / model_size);
  state_.messages.insert(state_.messages.begin(), format_world_size_line(a_));
}

void Resolver::batch_size() {
  auto& t = a_.training;
  const int dp = a_.parallel.data_parallel_size;
  mbs_ok_ = required_positive("--micro-batch-size", "micro_batch_size", t.micro_batch_size);
  if (!given("global_batch_size")) {
    if (mbs_ok_) {
      t.global_batch_size = t.micro_batch_size * dp;
      state_.messages.push_back("setting global batch size to " + num(std::int64_t{t.global_batch_size}));
    }
    gbs_ok_ = mbs_ok_;
  } else {
    gbs_ok_ = positive("--global-batch-size", "global_batch_size", t.global_batch_size);
  }
  if (mbs_ok_ && gbs_ok_ && t.global_batch_size % (t.micro_batch_size * dp) != 0) {
    problem("global batch size (" + num(std::int64_t{t.global_batch_size}) + ") is not divisible by micro batch size (" +
            num(std::int64_t{t.micro_batch_size}) + ") times data parallel size (" + num(std::int64_t{dp}) + ")");
    gbs_ok_ = false;
  }
}

// The layer split over stages and virtual stages and the schedule's micro-batch counts
// (PipelineLayout and PipelineShape carry Megatron's rules); the virtual stage count message.
void Resolver::pipeline() {
  auto& p = a_.parallel;
  // The layer split depends on the pipeline size alone (even when the world size does not fit it).
  const int pp = p.pipeline_model_parallel_size >= 1 ? p.pipeline_model_parallel_size : 1;
  const int layers = a_.model.num_layers;
  const bool count_given = p.num_virtual_stages_per_pipeline_rank && *p.num_virtual_stages_per_pipeline_rank > 0;
  if (!count_given && p.num_layers_per_virtual_pipeline_stage &&
      (p.decoder_first_pipeline_num_layers || p.decoder_last_pipeline_num_layers)) {
    problem("--num-layers-per-virtual-pipeline-stage assumes an even split; with "
            "--decoder-first-pipeline-num-layers or --decoder-last-pipeline-num-layers use "
            "--num-virtual-stages-per-pipeline-rank");
    return;
  } else if (!count_given && p.num_layers_per_virtual_pipeline_stage && *p.num_layers_per_virtual_pipeline_stage > 0 &&
             layers > 0) {
    const int per_stage = layers / pp;
    if (layers % pp != 0 || per_stage % *p.num_layers_per_virtual_pipeline_stage != 0) {
      problem("number of layers per pipeline stage (" + num(std::int64_t{per_stage}) +
              ") must be divisible by --num-layers-per-virtual-pipeline-stage (" +
              num(std::int64_t{*p.num_layers_per_virtual_pipeline_stage}) + ")");
      return;
    }
  }
  const int chunks = parallel::PipelineLayout::virtual_chunks(layers, pp, p.num_virtual_stages_per_pipeline_rank,
                                                              p.num_layers_per_virtual_pipeline_stage);
  state_.messages.push_back("Number of virtual stages per pipeline stage: " +
                            (chunks > 1 ? num(std::int64_t{chunks}) : std::string("None")));
  if (layers <= 0) return;
  const parallel::PipelineLayout layout{layers, pp, chunks, p.decoder_first_pipeline_num_layers,
                                        p.decoder_last_pipeline_num_layers};
  for (auto& message : layout.validate()) problem(std::move(message));
  if (chunks > 1 && pp > 1 && parallel_ok_ && mbs_ok_ && gbs_ok_) {
    const auto& t = a_.training;
    const parallel::PipelineShape shape{pp, chunks, t.global_batch_size / (t.micro_batch_size * p.data_parallel_size),
                                        p.microbatch_group_size_per_vp_stage.value_or(0)};
    for (auto& message : shape.validate()) problem(std::move(message));
  }
}

void Resolver::precision() {
  auto& x = a_.precision;
  check(!(x.fp16 && x.bf16), "--fp16 and --bf16 cannot be used together");
  unsupported(x.fp8.has_value(), "--fp8-format");
  x.params_dtype = "torch.float32";
  if (x.fp16) x.params_dtype = "torch.float16";
  if (x.bf16) {
    x.params_dtype = "torch.bfloat16";
    if (x.grad_reduce_in_bf16) {
      x.accumulate_allreduce_grads_in_fp32 = false;
    } else if (!x.accumulate_allreduce_grads_in_fp32) {
      x.accumulate_allreduce_grads_in_fp32 = true;
      state_.messages.push_back("accumulate and all-reduce gradients in fp32 for bfloat16 data type.");
    }
  }
  state_.messages.push_back("using " + x.params_dtype + " for parameters ...");
  check(!x.fp16_lm_cross_entropy || x.fp16, "--fp16-lm-cross-entropy needs --fp16 (lm cross entropy in fp16 only support in fp16 mode)");
  check(!x.fp32_residual_connection || x.fp16 || x.bf16, "--fp32-residual-connection needs --fp16 or --bf16");
  unsupported(x.fp32_residual_connection && (x.fp16 || x.bf16), "--fp32-residual-connection",
              "the residual stream stays in the parameters' dtype");
  if (x.apply_query_key_layer_scaling) x.attention_softmax_in_fp32 = true;
  if (x.loss_scale) at_least("--loss-scale", *x.loss_scale, 0.0, "positive");
  check(x.initial_loss_scale > 0 && x.min_loss_scale > 0, "--initial-loss-scale and --min-loss-scale must be positive");
  positive("--hysteresis", "hysteresis", x.hysteresis);
}

void Resolver::iterations() {
  const auto& t = a_.training;
  const auto& s = a_.scheduler;
  if (t.train_iters && t.train_samples) {
    problem("--train-iters and --train-samples cannot be used together: train by iterations or by samples");
    return;
  }
  if (!t.train_iters && !t.train_samples) {
    if (valid("train_iters") && valid("train_samples")) problem("one of --train-iters or --train-samples is required");
    return;
  }
  if (t.train_iters) {
    iters_ok_ = positive("--train-iters", "train_iters", *t.train_iters);
    check(!s.lr_decay_samples, "--lr-decay-samples needs --train-samples (expected iteration-based learning rate decay: --lr-decay-iters)");
    check(s.lr_warmup_samples == 0, "--lr-warmup-samples needs --train-samples (expected iteration-based learning rate warmup: --lr-warmup-iters)");
    check(!s.lr_wsd_decay_samples, "--lr-wsd-decay-samples needs --train-samples (use --lr-wsd-decay-iters)");
    check(!s.lr_warmup_fraction || s.lr_warmup_iters == 0, "can only specify one of --lr-warmup-fraction and --lr-warmup-iters");
  } else {
    iters_ok_ = positive("--train-samples", "train_samples", *t.train_samples);
    check(!s.lr_decay_iters, "--lr-decay-iters needs --train-iters (expected sample-based learning rate decay: --lr-decay-samples)");
    check(s.lr_warmup_iters == 0, "--lr-warmup-iters needs --train-iters (expected sample-based learning rate warmup: --lr-warmup-samples)");
    check(!s.lr_wsd_decay_iters, "--lr-wsd-decay-iters needs --train-iters (use --lr-wsd-decay-samples)");
    check(!s.lr_warmup_fraction || s.lr_warmup_samples == 0, "can only specify one of --lr-warmup-fraction and --lr-warmup-samples");
  }
  if (t.exit_interval) positive("--exit-interval", "exit_interval", *t.exit_interval);
  const auto& l = a_.logging;
  positive("--tensorboard-log-interval", "tensorboard_log_interval", l.tensorboard_log_interval);
  positive("--tensorboard-queue-size", "tensorboard_queue_size", l.tensorboard_queue_size);
  if (t.exit_duration_in_mins) positive("--exit-duration-in-mins", "exit_duration_in_mins", *t.exit_duration_in_mins);
  try {
    parse_signal_name(t.exit_signal, "--exit-signal");
  } catch (const Error& e) {
    check(false, e.what());
  }
  check(t.seed > 0, "--seed must be a positive integer, got " + num(t.seed));
}

void Resolver::model() {
  auto& m = a_.model;
  const int tp = parallel_ok_ ? a_.parallel.tensor_model_parallel_size : 1;
  required_positive("--num-layers", "num_layers", m.num_layers);  // the split over stages: pipeline()
  const bool hidden = required_positive("--hidden-size", "hidden_size", m.hidden_size);
  const bool heads = required_positive("--num-attention-heads", "num_attention_heads", m.num_attention_heads);
  const bool seq = required_positive("--seq-length", "seq_length", m.seq_length);
  const bool max_pos = required_positive("--max-position-embeddings", "max_position_embeddings", m.max_position_embeddings);
  if (given("ffn_hidden_size")) {
    positive("--ffn-hidden-size", "ffn_hidden_size", m.ffn_hidden_size);
  } else if (hidden) {
    // In 64 bits: 4 * hidden overflows an int from 536870912 on.
    const std::int64_t h = m.hidden_size;
    const std::int64_t size = model::ModelConfig::default_ffn_hidden_size(h, m.swiglu);
    if (size > std::numeric_limits<int>::max()) {
      problem("--hidden-size " + num(h) + " is too large: the MLP size it implies (" + (m.swiglu ? "int(8h/3/64)*64" : "4h") +
              " = " + num(size) + ") exceeds " + num(std::int64_t{std::numeric_limits<int>::max()}) +
              "; lower --hidden-size (or give --ffn-hidden-size)");
    } else {
      m.ffn_hidden_size = static_cast<int>(size);
    }
  }
  if (given("kv_channels")) {
    positive("--kv-channels", "kv_channels", m.kv_channels);
  } else if (hidden && heads) {
    if (m.hidden_size % m.num_attention_heads != 0) {
      problem("--hidden-size (" + num(std::int64_t{m.hidden_size}) + ") is not divisible by --num-attention-heads (" +
              num(std::int64_t{m.num_attention_heads}) + "); give --kv-channels to set the head size");
    } else {
      m.kv_channels = m.hidden_size / m.num_attention_heads;
    }
  }
  if (heads) {
    check(m.num_attention_heads % tp == 0, "--num-attention-heads (" + num(std::int64_t{m.num_attention_heads}) +
                                               ") must be a multiple of --tensor-model-parallel-size (" + num(std::int64_t{tp}) + ")");
  }
  if (m.group_query_attention && positive("--num-query-groups", "num_query_groups", m.num_query_groups) && heads) {
    check(m.num_attention_heads % m.num_query_groups == 0,
          "--num-attention-heads (" + num(std::int64_t{m.num_attention_heads}) + ") must be divisible by --num-query-groups (" +
              num(std::int64_t{m.num_query_groups}) + ")");
    check(m.num_query_groups % tp == 0, "--num-query-groups (" + num(std::int64_t{m.num_query_groups}) +
                                            ") must be a multiple of --tensor-model-parallel-size (" + num(std::int64_t{tp}) + ")");
  } else if (!m.group_query_attention && given("num_query_groups")) {
    state_.messages.push_back("WARNING: --num-query-groups is ignored without --group-query-attention");
  }
  if (m.ffn_hidden_size > 0 && tp > 1) {
    check(m.ffn_hidden_size % tp == 0, "--ffn-hidden-size (" + num(std::int64_t{m.ffn_hidden_size}) +
                                           ") must be divisible by --tensor-model-parallel-size (" + num(std::int64_t{tp}) + ")");
  }
  if (seq) sequence_length(max_pos, tp);
  if (const int cp = a_.parallel.context_parallel_size; cp > 1) {
    unsupported(a_.data.reset_attention_mask, "--reset-attention-mask with --context-parallel-size " + num(std::int64_t{cp}),
                "context-parallel attention is plain causal");
  }
  if (m.use_rotary_position_embeddings) m.position_embedding_type = PositionEmbeddingType::kRope;
  positive("--rotary-base", "rotary_base", m.rotary_base);
  check(m.rotary_percent > 0 && m.rotary_percent <= 1, "--rotary-percent must be in (0, 1], got " + num(m.rotary_percent));
  check(m.norm_epsilon > 0, "--norm-epsilon must be positive, got " + num(m.norm_epsilon));
  at_least("--init-method-std", m.init_method_std, 0.0);
  check(m.attention_dropout >= 0 && m.attention_dropout <= 1, "--attention-dropout must be in [0, 1], got " + num(m.attention_dropout));
  check(m.hidden_dropout >= 0 && m.hidden_dropout <= 1, "--hidden-dropout must be in [0, 1], got " + num(m.hidden_dropout));
  positive("--make-vocab-size-divisible-by", "make_vocab_size_divisible_by", m.make_vocab_size_divisible_by);
  unsupported(!m.add_bias_linear && m.add_qkv_bias, "--add-qkv-bias with --disable-bias-linear", "a bias on QKV only");
  if (m.add_bias_linear) m.add_qkv_bias = true;
  recompute();
}

// The sequence length against the positions, sequence parallelism and context parallelism (a
// valid --seq-length; `max_pos`: a valid --max-position-embeddings).
void Resolver::sequence_length(bool max_pos, int tp) {
  const auto& m = a_.model;
  if (max_pos && m.max_position_embeddings < m.seq_length) {
    problem("max_position_embeddings (" + num(std::int64_t{m.max_position_embeddings}) +
            ") must be greater than or equal to seq_length (" + num(std::int64_t{m.seq_length}) +
            "): raise --max-position-embeddings or lower --seq-length");
  }
  if (tp > 1 && a_.parallel.sequence_parallel) {
    check(m.seq_length % tp == 0, "--seq-length (" + num(std::int64_t{m.seq_length}) +
                                      ") must be divisible by --tensor-model-parallel-size (" + num(std::int64_t{tp}) +
                                      ") with --sequence-parallel");
  }
  if (const int cp = a_.parallel.context_parallel_size; cp > 1) {
    check(m.seq_length % (2 * cp) == 0,
          "--seq-length should be a multiple of 2 * --context-parallel-size if context-parallel-size > 1");
    // Each rank's 2 chunks are split again over TP by sequence parallelism.
    check(!(tp > 1 && a_.parallel.sequence_parallel) || m.seq_length % (2 * cp * tp) == 0,
          "--seq-length (" + num(std::int64_t{m.seq_length}) + ") must be a multiple of 2 x --context-parallel-size x " +
              "--tensor-model-parallel-size (" + num(std::int64_t{2 * cp * tp}) + ") with --sequence-parallel");
  }
}

// Megatron's recomputation rules (validate_args and TransformerConfig.__post_init__).
void Resolver::recompute() {
  auto& m = a_.model;
  if (m.recompute_activations) m.recompute_granularity = RecomputeGranularity::kSelective;
  if (m.recompute_granularity == RecomputeGranularity::kSelective) {
    check(!m.recompute_method, "recompute method is not yet supported for selective recomputing granularity "
                               "(drop --recompute-method, or use --recompute-granularity full)");
    if (m.recompute_modules) {
      for (const auto& module : *m.recompute_modules) {
        unsupported(module != "core_attn", "--recompute-modules " + module, "only core_attn is recomputed selectively");
      }
    }
  }
  if (m.recompute_granularity == RecomputeGranularity::kFull) {
    check(m.recompute_method.has_value(),
          "--recompute-granularity full needs --recompute-method uniform or block (Megatron's TransformerConfig)");
    check(m.recompute_num_layers.has_value(),
          "--recompute-granularity full needs --recompute-num-layers (between 1 and the layers per pipeline stage)");
    if (m.recompute_num_layers) {
      positive("--recompute-num-layers", "recompute_num_layers", *m.recompute_num_layers);
      const int pp = a_.parallel.pipeline_model_parallel_size;
      if (m.num_layers > 0 && pp > 0) {
        check(*m.recompute_num_layers <= m.num_layers / std::max(1, pp),
              "--recompute-num-layers (" + num(std::int64_t{*m.recompute_num_layers}) +
                  ") must be at most the layers per pipeline stage (" + num(std::int64_t{m.num_layers / std::max(1, pp)}) + ")");
      }
    }
  }
}

void resolve_arguments(Arguments& args, ParseState& state, const ParseOptions& options) {
  Resolver(args, state, options).run();
}

}  // namespace megatron::train::detail
