// Values Megatron derives after the argument dump (the model, tokenizer padding, microbatch
// calculator, get_optimizer_param_scheduler), computed from resolved Arguments the same way.
#include <cmath>
#include <nlohmann/json.hpp>

#include "megatron/core/check.h"
#include "megatron/model/model_config.h"
#include "megatron/train/arguments.h"

namespace megatron::train {

model::ModelConfig model_config(const Arguments& args) {
  model::ModelConfig c = model::ModelConfig::from_arguments(nlohmann::json::parse(to_json(args)));
  c.padded_vocab_size = 0;  // known once the tokenizer is: VocabPlan::padded
  c.cp_all_gather = args.parallel.cp_comm_type.size() == 1 && args.parallel.cp_comm_type[0] == "all_gather";
  return c;
}

VocabPlan vocab_plan(const Arguments& args) {
  return VocabPlan{args.tokenizer.padded_vocab_size, args.model.make_vocab_size_divisible_by,
                   args.parallel.tensor_model_parallel_size};
}

std::int64_t VocabPlan::padded(std::int64_t tokenizer_vocab_size) const {
  const std::int64_t computed =
      model::ModelConfig::padded_vocab_size_for(tokenizer_vocab_size, make_vocab_size_divisible_by, tp);
  if (!padded_vocab_size) return computed;
  const std::int64_t given = *padded_vocab_size;
  // Smaller than the tokenizer, its ids would index past the embedding table.
  MEGATRON_CHECK(given >= tokenizer_vocab_size, "--padded-vocab-size ", given, " is smaller than the tokenizer's vocabulary (",
                 tokenizer_vocab_size, " tokens): token ids up to ", tokenizer_vocab_size - 1,
                 " would index past the embedding table; give at least ", tokenizer_vocab_size,
                 " or leave the flag out (the tokenizer's vocabulary is then padded to ", computed, ")");
  MEGATRON_CHECK(given % tp == 0, "--padded-vocab-size ", given, " is not divisible by --tensor-model-parallel-size ", tp,
                 ": the embedding table is split evenly over the tensor-parallel ranks; give a multiple of ", tp);
  return given;
}

std::string format_padded_vocab_line(std::int64_t vocab_size, std::int64_t padded) {
  return " > padded vocab (size: " + std::to_string(vocab_size) + ") with " + std::to_string(padded - vocab_size) +
         " dummy tokens (new size: " + std::to_string(padded) + ")";
}

int num_microbatches(const Arguments& args) {
  const auto& t = args.training;
  const int per_step = t.micro_batch_size * args.parallel.data_parallel_size;
  MEGATRON_ASSERT(per_step > 0 && t.global_batch_size % per_step == 0, "arguments are not resolved");
  return t.global_batch_size / per_step;
}

std::int64_t total_train_iters(const Arguments& args) {
  const auto& t = args.training;
  if (t.train_iters) return *t.train_iters;
  MEGATRON_ASSERT(t.train_samples && t.global_batch_size > 0, "arguments are not resolved");
  return *t.train_samples / t.global_batch_size;
}

optim::SchedulerConfig scheduler_config(const Arguments& args) {
  const auto& t = args.training;
  const auto& s = args.scheduler;
  const std::int64_t gbs = t.global_batch_size;
  optim::SchedulerConfig steps;
  steps.start_wd = args.optimizer.start_weight_decay.value_or(args.optimizer.weight_decay);
  steps.end_wd = args.optimizer.end_weight_decay.value_or(args.optimizer.weight_decay);
  steps.wd_incr_style = args.optimizer.weight_decay_incr_style;
  steps.max_lr = args.optimizer.lr.value_or(0.0);
  steps.min_lr = args.optimizer.min_lr;
  steps.init_lr = s.lr_warmup_init;
  steps.decay_style = s.lr_decay_style;
  steps.wsd_decay_style = s.lr_wsd_decay_style;
  if (t.train_iters) {
    steps.decay_steps = s.lr_decay_iters.value_or(*t.train_iters) * gbs;
    steps.wd_incr_steps = *t.train_iters * gbs;
    if (s.lr_wsd_decay_iters) steps.wsd_decay_steps = *s.lr_wsd_decay_iters * gbs;
    steps.warmup_steps = s.lr_warmup_fraction ? *s.lr_warmup_fraction * static_cast<double>(steps.decay_steps)
                                              : static_cast<double>(s.lr_warmup_iters * gbs);
  } else {
    MEGATRON_ASSERT(t.train_samples.has_value(), "arguments are not resolved");
    steps.decay_steps = s.lr_decay_samples.value_or(*t.train_samples);
    steps.wd_incr_steps = *t.train_samples;
    steps.wsd_decay_steps = s.lr_wsd_decay_samples.value_or(0);
    steps.warmup_steps = s.lr_warmup_fraction ? *s.lr_warmup_fraction * static_cast<double>(steps.decay_steps)
                                              : static_cast<double>(s.lr_warmup_samples);
  }
  return steps;
}

}  // namespace megatron::train
