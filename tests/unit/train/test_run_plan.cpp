// The run plan: each module's configuration and the trainer's policies derived once from a
// resolved command line, by Megatron's rules.
#include "megatron/train/run_plan.h"

#include <gtest/gtest.h>

#include <csignal>

#include "test_support.h"

namespace megatron::train {
namespace {

using Args = std::vector<std::string>;

Args base() {
  return {"--num-layers", "8", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
          "--max-position-embeddings", "32", "--micro-batch-size", "2", "--train-iters", "10", "--lr", "1e-3",
          "--tokenizer-type", "NullTokenizer", "--vocab-size", "100"};
}
RunPlan plan_of(Args more, int world = 1) {
  Args args = base();
  args.insert(args.end(), more.begin(), more.end());
  ParseOptions options;
  options.world_size = world;
  return make_run_plan(parse_arguments(args, options));
}

TEST(RunPlan, DerivesTheLayoutTheBatchesAndTheModel) {
  const RunPlan p = plan_of({"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
                             "--num-layers-per-virtual-pipeline-stage", "2", "--global-batch-size", "16", "--swiglu"},
                            8);
  EXPECT_EQ(p.parallel.dp(), 2);
  EXPECT_EQ(p.pipeline.chunks, 2);  // 8 layers / 2 stages / 2 per virtual stage
  EXPECT_TRUE(p.ddp.disable_bucketing);
  EXPECT_EQ(p.loop.num_microbatches, 4);  // 16 / (2 x DP 2)
  EXPECT_EQ(p.model.ffn_hidden_size, 128);  // int(4 x 64 x 2/3 / 64) x 64
  EXPECT_EQ(p.model.kv_channels, 16);
  EXPECT_EQ(p.model.padded_vocab_size, 0);  // known once the tokenizer is
  EXPECT_EQ(p.vocab.padded(100), 256);      // 128 x TP 2
  EXPECT_EQ(p.tokenizer.type, tokenizer::TokenizerType::kNull);
  EXPECT_EQ(p.tokenizer.vocab_size, 100);
  EXPECT_EQ(p.data.counts.train_iters, 10);
  EXPECT_EQ(p.arguments.at("num_layers"), 8);
  EXPECT_NE(p.argument_dump.find("------------------------ arguments ------------------------"), std::string::npos);
}

TEST(RunPlan, PrecisionPicksMegatronsScalerAndGradientDtype) {
  const RunPlan fp32 = plan_of({});
  EXPECT_EQ(fp32.precision.params, at::kFloat);
  EXPECT_FALSE(fp32.precision.scaler.has_value());
  const RunPlan bf16 = plan_of({"--bf16"});
  EXPECT_EQ(bf16.precision.params, at::kBFloat16);
  EXPECT_EQ(bf16.precision.params_name, "torch.bfloat16");
  EXPECT_TRUE(bf16.precision.grad_in_fp32);  // Megatron accumulates bf16 gradients in fp32
  EXPECT_FALSE(bf16.precision.scaler.has_value());
  const RunPlan fp16 = plan_of({"--fp16", "--initial-loss-scale", "65536"});
  ASSERT_TRUE(fp16.precision.scaler.has_value());
  EXPECT_TRUE(fp16.precision.scaler->dynamic);
  EXPECT_EQ(fp16.precision.scaler->scale, 65536.0);
  const RunPlan constant = plan_of({"--bf16", "--loss-scale", "128"});
  ASSERT_TRUE(constant.precision.scaler.has_value());
  EXPECT_FALSE(constant.precision.scaler->dynamic);
}

TEST(RunPlan, ChoiceFlagsReachTheModulesAsTheirEnums) {
  const RunPlan p = plan_of({"--attention-backend", "unfused", "--recompute-granularity", "full", "--recompute-method",
                             "block", "--recompute-num-layers", "1", "--weight-decay-incr-style", "cosine",
                             "--start-weight-decay", "0.0", "--end-weight-decay", "0.1"});
  EXPECT_EQ(p.model.attention_backend, model::AttentionBackend::kUnfused);
  EXPECT_EQ(p.model.recompute_granularity, model::RecomputeGranularity::kFull);
  EXPECT_EQ(p.model.recompute_method, model::RecomputeMethod::kBlock);
  EXPECT_EQ(p.scheduler.wd_incr_style, optim::WdIncrStyle::kCosine);
  EXPECT_EQ(p.scheduler.start_wd, 0.0);
  EXPECT_EQ(p.scheduler.end_wd, 0.1);
  const RunPlan defaults = plan_of({});
  EXPECT_EQ(defaults.model.attention_backend, model::AttentionBackend::kAuto);
  EXPECT_EQ(defaults.model.recompute_granularity, model::RecomputeGranularity::kNone);
  EXPECT_EQ(defaults.scheduler.wd_incr_style, optim::WdIncrStyle::kConstant);
}

TEST(RunPlan, PoliciesComeFromTheirFlags) {
  const RunPlan p = plan_of({"--save", "/tmp/x", "--save-interval", "4", "--no-save-optim", "--keep-last-checkpoints",
                             "2", "--exit-signal-handler", "--exit-signal", "SIGUSR1", "--exit-interval", "6",
                             "--num-workers", "3", "--tensorboard-dir", "/tmp/tb", "--log-timers-to-tensorboard"});
  EXPECT_EQ(*p.checkpoint.save, "/tmp/x");
  EXPECT_EQ(*p.checkpoint.save_interval, 4);
  EXPECT_FALSE(p.checkpoint.save_optimizer);
  EXPECT_TRUE(p.checkpoint.save_rng);
  EXPECT_EQ(*p.checkpoint.retention.keep_last, 2);
  EXPECT_EQ(*p.exit.signal, SIGUSR1);
  EXPECT_EQ(*p.exit.interval, 6);
  EXPECT_EQ(p.loop.prefetch, 6);  // two micro-batches per worker
  EXPECT_EQ(plan_of({"--num-workers", "0"}).loop.prefetch, 0);
  EXPECT_EQ(*p.tensorboard.dir, "/tmp/tb");
  EXPECT_TRUE(p.tensorboard.timers);
  EXPECT_FALSE(plan_of({}).exit.signal.has_value());
}

}  // namespace
}  // namespace megatron::train
