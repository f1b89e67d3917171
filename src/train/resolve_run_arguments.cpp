// Megatron's validate_args for the implemented flags, part two: data sources and split, optimizer
// and learning-rate schedule (with OptimizerParamScheduler's assertions), tokenizer, logging and
// checkpoint intervals.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>

#include "megatron/core/check.h"
#include "megatron/data/dataset_split.h"
#include "resolve_arguments.h"

namespace megatron::train::detail {

void Resolver::data_sources() {
  auto& d = a_.data;
  if (d.data_path && !d.split) {
    d.split = "969, 30, 1";
    state_.messages.push_back("WARNING: Please specify --split when using --data-path. Using legacy default value of \"969, 30, 1\"");
  }
  const int sources = int{d.mock_data} + int{d.data_path.has_value()} +
                      int{d.train_data_path || d.valid_data_path || d.test_data_path};
  check(sources <= 1, "A single data source must be provided in training mode, else None: give one of --mock-data, "
                      "--data-path, or --train-data-path/--valid-data-path/--test-data-path");
  if (d.split && valid("split")) {
    try {
      data::parse_split(*d.split);  // the data module's parser: one home for --split
    } catch (const Error& e) {
      problem(e.what());
    }
  }
  if (!d.dataloader_type) d.dataloader_type = "single";
  at_least("--num-workers", d.num_workers, 0);
  positive("--num-dataset-builder-threads", "num_dataset_builder_threads", d.num_dataset_builder_threads);
  at_least("--mid-level-dataset-surplus", d.mid_level_dataset_surplus, 0.0);
}

void Resolver::optimizer() {
  auto& o = a_.optimizer;
  if (!o.lr) {
    if (valid("lr")) problem("--lr is required (the peak learning rate)");
  } else {
    at_least("--lr", *o.lr, 0.0);
    check(o.min_lr <= *o.lr, "--min-lr (" + num(o.min_lr) + ") must not exceed --lr (" + num(*o.lr) + ")");
  }
  at_least("--min-lr", o.min_lr, 0.0);
  at_least("--weight-decay", o.weight_decay, 0.0);
  at_least("--clip-grad", o.clip_grad, 0.0);
  check(o.adam_beta1 >= 0 && o.adam_beta1 < 1, "--adam-beta1 must be in [0, 1), got " + num(o.adam_beta1));
  check(o.adam_beta2 >= 0 && o.adam_beta2 < 1, "--adam-beta2 must be in [0, 1), got " + num(o.adam_beta2));
  at_least("--adam-eps", o.adam_eps, 0.0);
  // Megatron's rule: a constant decay is --weight-decay; an increasing one goes from
  // --start-weight-decay to --end-weight-decay over the whole run.
  if (o.weight_decay_incr_style == WdIncrStyle::kConstant) {
    check(!o.start_weight_decay && !o.end_weight_decay,
          "--start-weight-decay and --end-weight-decay need --weight-decay-incr-style linear or cosine");
    o.start_weight_decay = o.weight_decay;
    o.end_weight_decay = o.weight_decay;
  } else {
    const std::string style(enum_name(o.weight_decay_incr_style));
    check(o.start_weight_decay && o.end_weight_decay,
          "--weight-decay-incr-style " + style + " needs --start-weight-decay and --end-weight-decay");
    if (o.start_weight_decay) at_least("--start-weight-decay", *o.start_weight_decay, 0.0);
    if (o.end_weight_decay) at_least("--end-weight-decay", *o.end_weight_decay, 0.0);
  }
  schedule();
}

// OptimizerParamScheduler's assertions, checked up front.

void Resolver::schedule() {
  const auto& s = a_.scheduler;
  check(!(s.override_opt_param_scheduler && s.use_checkpoint_opt_param_scheduler),
        "--override-opt-param-scheduler and --use-checkpoint-opt-param-scheduler cannot be used together "
        "(take this run's schedule, or the checkpoint's)");
  const std::size_t problems_before = state_.problems.size();
  if (s.lr_decay_iters) positive("--lr-decay-iters", "lr_decay_iters", *s.lr_decay_iters);
  if (s.lr_decay_samples) positive("--lr-decay-samples", "lr_decay_samples", *s.lr_decay_samples);
  at_least("--lr-warmup-iters", static_cast<double>(s.lr_warmup_iters), 0.0);
  at_least("--lr-warmup-samples", static_cast<double>(s.lr_warmup_samples), 0.0);
  if (s.lr_warmup_fraction) at_least("--lr-warmup-fraction", *s.lr_warmup_fraction, 0.0);
  at_least("--lr-warmup-init", s.lr_warmup_init, 0.0);
  if (s.lr_decay_style == LrDecayStyle::kWsd) {
    check(s.lr_wsd_decay_iters || s.lr_wsd_decay_samples,
          "--lr-decay-style WSD needs the length of its annealing phase: --lr-wsd-decay-iters (or --lr-wsd-decay-samples)");
  }
  if (!iters_ok_ || !gbs_ok_ || state_.problems.size() != problems_before) return;
  const optim::SchedulerConfig steps = scheduler_config(a_);
  if (steps.decay_steps <= 0) {
    problem("the learning rate decays over " + num(steps.decay_steps) + " samples; --lr-decay-iters/--lr-decay-samples must be positive");
  } else if (steps.warmup_steps >= static_cast<double>(steps.decay_steps)) {
    problem("the learning-rate warmup (" + num(steps.warmup_steps) + " samples) must be shorter than its decay (" +
            num(steps.decay_steps) + " samples): lower --lr-warmup-iters/--lr-warmup-fraction or raise --lr-decay-iters");
  }
}

void Resolver::tokenizer() {
  auto& k = a_.tokenizer;
  if (!k.tokenizer_type && k.vocab_file && k.merge_file) {
    k.tokenizer_type = tokenizer::TokenizerType::kGpt2Bpe;
    state_.messages.push_back("WARNING: --tokenizer-type not given; using GPT2BPETokenizer for --vocab-file and --merge-file");
  }
  if (!k.tokenizer_type) {
    if (valid("tokenizer_type")) {
      problem("--tokenizer-type is required: GPT2BPETokenizer (with --vocab-file and --merge-file), NullTokenizer "
              "(with --vocab-size), or HuggingFaceTokenizer, SentencePieceTokenizer, GPTSentencePieceTokenizer, "
              "Llama2Tokenizer, TikTokenizer (with --tokenizer-model)");
    }
  } else {
    using tokenizer::TokenizerType;
    const TokenizerType type = *k.tokenizer_type;
    const std::string name(enum_name(type));
    switch (type) {
      case TokenizerType::kGpt2Bpe:
        tokenizer_file(name, "--vocab-file", k.vocab_file);
        tokenizer_file(name, "--merge-file", k.merge_file);
        break;
      case TokenizerType::kNull:
        if (!k.vocab_size && valid("vocab_size")) problem("--tokenizer-type NullTokenizer needs --vocab-size");
        break;
      case TokenizerType::kTikToken:
        tokenizer_file(name, "--tokenizer-model", k.tokenizer_model);
        if (!k.tiktoken_pattern) {
          if (valid("tiktoken_pattern")) problem("--tokenizer-type TikTokenizer needs --tiktoken-pattern v1 or v2");
        } else if (*k.tiktoken_pattern != "v1" && *k.tiktoken_pattern != "v2") {
          problem("--tiktoken-pattern must be v1 or v2, got '" + *k.tiktoken_pattern + "'");
        }
        if (k.tiktoken_num_special_tokens < 0) {
          problem("--tiktoken-num-special-tokens must be at least 0, got " + num(k.tiktoken_num_special_tokens));
        }
        break;
      case TokenizerType::kHuggingFace:
        // A folder with tokenizer.json or the file; a hub name is refused when the tokenizer is built.
        if (!k.tokenizer_model) {
          problem("--tokenizer-type HuggingFaceTokenizer needs --tokenizer-model (a folder with tokenizer.json)");
        }
        break;
      case TokenizerType::kSentencePiece:
      case TokenizerType::kGptSentencePiece:
      case TokenizerType::kLlama2: tokenizer_file(name, "--tokenizer-model", k.tokenizer_model); break;
    }
  }
  if (k.vocab_size) positive("--vocab-size", "vocab_size", *k.vocab_size);
  if (k.padded_vocab_size) positive("--padded-vocab-size", "padded_vocab_size", *k.padded_vocab_size);
  if (k.vocab_extra_ids < 0) problem("--vocab-extra-ids must be at least 0, got " + num(std::int64_t{k.vocab_extra_ids}));
}

void Resolver::tokenizer_file(const std::string& type, const std::string& flag, const std::optional<std::string>& path) {
  if (!path) {
    problem("--tokenizer-type " + type + " needs " + flag);
  } else if (!std::filesystem::is_regular_file(*path)) {
    problem(flag + " " + *path + ": no such file");
  }
}

void Resolver::logging_and_checkpoints() {
  const auto& l = a_.logging;
  auto& c = a_.checkpoint;
  if (!c.ckpt_format) c.ckpt_format = "megatron_cpp";
  positive("--log-interval", "log_interval", l.log_interval);
  positive("--eval-interval", "eval_interval", l.eval_interval);
  at_least("--eval-iters", static_cast<double>(l.eval_iters), 0.0);
  if (c.save_interval) positive("--save-interval", "save_interval", *c.save_interval);
  if (c.save && !c.save_interval && valid("save_interval")) {
    problem("--save needs --save-interval (iterations between checkpoints)");
  }
  if (c.save_retain_interval) {
    positive("--save-retain-interval", "save_retain_interval", *c.save_retain_interval);
    if (c.save_interval && *c.save_interval > 0 && *c.save_retain_interval > 0 &&
        *c.save_retain_interval % *c.save_interval != 0) {
      problem("--save-retain-interval " + num(*c.save_retain_interval) + " must be a multiple of --save-interval " +
              num(*c.save_interval));
    }
  }
  if (c.keep_last_checkpoints) positive("--keep-last-checkpoints", "keep_last_checkpoints", *c.keep_last_checkpoints);
  if (!c.save && (c.async_save || c.save_retain_interval || c.keep_last_checkpoints)) {
    problem(std::string(c.async_save ? "--async-save" : c.save_retain_interval ? "--save-retain-interval"
                                                                                : "--keep-last-checkpoints") +
            " needs --save");
  }
}

}  // namespace megatron::train::detail
