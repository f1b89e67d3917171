// Parsing and validation of pretrain_gpt.py's flags: Megatron's defaults, derived values, every
// validation rule, all problems reported together, and what this build rejects.
#include <gtest/gtest.h>

#include <algorithm>

#include "megatron/model/model_config.h"
#include "megatron/train/arguments.h"
#include "test_support.h"

namespace megatron::train {
namespace {

using megatron::testing::error_of;
using megatron::testing::expect_contains;
using Args = std::vector<std::string>;

std::string vocab() { return megatron::testing::gpt2_vocab_file(); }
std::string merges() { return megatron::testing::gpt2_merges_file(); }

// A small valid command line; tests append flags (argparse: the last occurrence wins).
Args base() {
  return {"--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
          "--max-position-embeddings", "32", "--micro-batch-size", "2", "--train-iters", "10", "--lr", "1e-3",
          "--tokenizer-type", "NullTokenizer", "--vocab-size", "100"};
}
Args with(Args args, const Args& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}
// `args` minus the flag `flag` and its one value.
Args without(Args args, const std::string& flag) {
  const auto it = std::find(args.begin(), args.end(), flag);
  if (it != args.end()) args.erase(it, it + 2);
  return args;
}
ParseOptions collecting(std::vector<std::string>& messages) {
  ParseOptions options;
  options.messages = &messages;
  return options;
}
ParseOptions world(int world_size) {
  ParseOptions options;
  options.world_size = world_size;
  return options;
}
std::string problem_of(const Args& args, const ParseOptions& options = {}) {
  return error_of([&] { parse_arguments(args, options); });
}

TEST(Arguments, MemberDefaultsAreMegatrons) {
  const Arguments a;
  EXPECT_EQ(a.logging.log_interval, 100);
  EXPECT_EQ(a.logging.eval_iters, 100);
  EXPECT_EQ(a.logging.eval_interval, 1000);
  EXPECT_DOUBLE_EQ(a.optimizer.weight_decay, 0.01);
  EXPECT_DOUBLE_EQ(a.optimizer.clip_grad, 1.0);
  EXPECT_DOUBLE_EQ(a.model.attention_dropout, 0.1);
  EXPECT_DOUBLE_EQ(a.model.hidden_dropout, 0.1);
  EXPECT_DOUBLE_EQ(a.model.init_method_std, 0.02);
  EXPECT_EQ(a.training.seed, 1234);
  EXPECT_EQ(a.model.make_vocab_size_divisible_by, 128);
  EXPECT_DOUBLE_EQ(a.model.norm_epsilon, 1e-5);
  EXPECT_EQ(a.model.rotary_base, 10000);
  EXPECT_DOUBLE_EQ(a.model.rotary_percent, 1.0);
  EXPECT_EQ(a.model.position_embedding_type, PositionEmbeddingType::kLearnedAbsolute);
  EXPECT_EQ(a.model.normalization, Normalization::kLayerNorm);
  EXPECT_EQ(a.scheduler.lr_decay_style, LrDecayStyle::kLinear);
  EXPECT_EQ(a.scheduler.lr_wsd_decay_style, WsdDecayStyle::kExponential);
  EXPECT_DOUBLE_EQ(a.optimizer.min_lr, 0.0);
  EXPECT_DOUBLE_EQ(a.scheduler.lr_warmup_init, 0.0);
  EXPECT_DOUBLE_EQ(a.optimizer.adam_beta1, 0.9);
  EXPECT_DOUBLE_EQ(a.optimizer.adam_beta2, 0.999);
  EXPECT_DOUBLE_EQ(a.optimizer.adam_eps, 1e-8);
  EXPECT_EQ(a.optimizer.optimizer, "adam");
  EXPECT_EQ(a.model.num_query_groups, 1);
  EXPECT_TRUE(a.model.add_bias_linear);
  EXPECT_EQ(a.parallel.tensor_model_parallel_size, 1);
  EXPECT_EQ(a.parallel.cp_comm_type, std::vector<std::string>{"p2p"});
  EXPECT_DOUBLE_EQ(a.precision.initial_loss_scale, 4294967296.0);
  EXPECT_EQ(a.precision.hysteresis, 2);
  EXPECT_EQ(a.data.num_workers, 2);
  EXPECT_DOUBLE_EQ(a.data.mid_level_dataset_surplus, 0.005);
}

TEST(Arguments, ResolvesMegatronsDerivedValues) {
  std::vector<std::string> messages;
  const Arguments a = parse_arguments(base(), collecting(messages));
  EXPECT_EQ(a.model.ffn_hidden_size, 256);
  EXPECT_EQ(a.model.kv_channels, 16);
  EXPECT_EQ(a.training.global_batch_size, 2);
  EXPECT_EQ(a.parallel.data_parallel_size, 1);
  EXPECT_EQ(a.data.dataloader_type, "single");
  EXPECT_FALSE(a.data.split.has_value());
  EXPECT_TRUE(a.model.add_qkv_bias);
  EXPECT_EQ(a.optimizer.start_weight_decay, 0.01);
  EXPECT_EQ(a.optimizer.end_weight_decay, 0.01);
  EXPECT_FALSE(a.parallel.overlap_p2p_comm);
  EXPECT_EQ(num_microbatches(a), 1);
  EXPECT_EQ(messages, (std::vector<std::string>{
                          "using world size: 1, data-parallel size: 1, context-parallel size: 1, hierarchical "
                          "context-parallel sizes: None, tensor-model-parallel size: 1, pipeline-model-parallel size: 1",
                          "setting global batch size to 2", "Number of virtual stages per pipeline stage: None",
                          "using torch.float32 for parameters ..."}));
}

TEST(Arguments, SwigluFfnSizeIsTwoThirdsOfFourHRoundedDownTo64) {
  const auto ffn = [](const std::string& h) {
    return parse_arguments(with(base(), {"--hidden-size", h, "--num-attention-heads", "32", "--swiglu"})).model.ffn_hidden_size;
  };
  EXPECT_EQ(ffn("4096"), 10880);
  EXPECT_EQ(ffn("1024"), 2688);
  EXPECT_EQ(ffn("64"), 128);
  const Arguments given = parse_arguments(with(base(), {"--swiglu", "--ffn-hidden-size", "100", "--kv-channels", "8"}));
  EXPECT_EQ(given.model.ffn_hidden_size, 100);
  EXPECT_EQ(given.model.kv_channels, 8);
}

TEST(Arguments, PadsVocabularyForTensorParallelism) {
  EXPECT_EQ(model::ModelConfig::padded_vocab_size_for(50257, 128, 1), 50304);
  EXPECT_EQ(model::ModelConfig::padded_vocab_size_for(50257, 128, 2), 50432);
  EXPECT_EQ(model::ModelConfig::padded_vocab_size_for(50257, 128, 8), 51200);
  EXPECT_EQ(model::ModelConfig::padded_vocab_size_for(50304, 128, 1), 50304);
  EXPECT_EQ(format_padded_vocab_line(50257, 50304), " > padded vocab (size: 50257) with 47 dummy tokens (new size: 50304)");
  const Arguments tp2 = parse_arguments(with(base(), {"--tensor-model-parallel-size", "2"}),
                                        world(2));
  EXPECT_EQ(padded_vocab_size(tp2, 50257), 50432);
  EXPECT_EQ(padded_vocab_size(parse_arguments(with(base(), {"--padded-vocab-size", "50257"})), 50257), 50257);
}

TEST(Arguments, ReadsValuesAsArgparseDoes) {
  const Arguments a = parse_arguments(with(base(), {"--lr=2e-4", "--num-layers", "3", "--num-layers", "4", "--min-lr", "-0.0",
                                                    "--persistent-save-interval", "5", "--save", "ckpt", "--data-path",
                                                    "0.3", "a", "0.7", "b", "--split", "949,50,1", "--seed", "1_000"}));
  EXPECT_EQ(a.optimizer.lr, 2e-4);
  EXPECT_EQ(a.model.num_layers, 4);
  EXPECT_EQ(a.checkpoint.save_interval, 5);
  EXPECT_EQ(a.data.data_path, (std::vector<std::string>{"0.3", "a", "0.7", "b"}));
  EXPECT_EQ(a.data.split, "949,50,1");
  EXPECT_EQ(a.training.seed, 1000);
  EXPECT_EQ(parse_arguments(with(base(), {"--init-method-std", " 1e-400 "})).model.init_method_std, 0.0);
}

TEST(Arguments, DataPathWithoutSplitUsesLegacyDefaultWithWarning) {
  std::vector<std::string> messages;
  const Arguments a = parse_arguments(with(base(), {"--data-path", "corpus"}), collecting(messages));
  EXPECT_EQ(a.data.split, "969, 30, 1");
  EXPECT_EQ(messages.at(1), "WARNING: Please specify --split when using --data-path. Using legacy default value of \"969, 30, 1\"");
}

TEST(Arguments, RotaryAliasAndEnums) {
  const Arguments a = parse_arguments(with(base(), {"--use-rotary-position-embeddings", "--normalization", "RMSNorm",
                                                    "--lr-decay-style", "WSD", "--lr-wsd-decay-iters", "2",
                                                    "--lr-wsd-decay-style", "minus_sqrt", "--disable-bias-linear"}));
  EXPECT_EQ(a.model.position_embedding_type, PositionEmbeddingType::kRope);
  EXPECT_EQ(a.model.normalization, Normalization::kRmsNorm);
  EXPECT_EQ(a.scheduler.lr_decay_style, LrDecayStyle::kWsd);
  EXPECT_EQ(a.scheduler.lr_wsd_decay_style, WsdDecayStyle::kMinusSqrt);
  EXPECT_FALSE(a.model.add_bias_linear);
  EXPECT_FALSE(a.model.add_qkv_bias);
}

TEST(Arguments, InfersGpt2TokenizerFromVocabAndMergeFiles) {
  std::vector<std::string> messages;
  Args args = without(without(base(), "--tokenizer-type"), "--vocab-size");
  const Arguments a = parse_arguments(with(args, {"--vocab-file", vocab(), "--merge-file", merges()}), collecting(messages));
  EXPECT_EQ(a.tokenizer.tokenizer_type, "GPT2BPETokenizer");
  EXPECT_NE(std::find(messages.begin(), messages.end(),
                      "WARNING: --tokenizer-type not given; using GPT2BPETokenizer for --vocab-file and --merge-file"),
            messages.end());
}

struct Invalid {
  Args args;
  std::string expected;
};

TEST(Arguments, ReportsEachValidationError) {
  const Args gqa = {"--group-query-attention", "--num-query-groups", "3"};
  const std::vector<Invalid> cases = {
      {without(base(), "--num-layers"), "--num-layers is required"},
      {without(base(), "--hidden-size"), "--hidden-size is required"},
      {without(base(), "--num-attention-heads"), "--num-attention-heads is required"},
      {without(base(), "--seq-length"), "--seq-length is required"},
      {without(base(), "--max-position-embeddings"), "--max-position-embeddings is required"},
      {without(base(), "--micro-batch-size"), "--micro-batch-size is required"},
      {without(base(), "--lr"), "--lr is required"},
      {without(base(), "--train-iters"), "one of --train-iters or --train-samples is required"},
      {without(base(), "--tokenizer-type"), "--tokenizer-type is required"},
      {without(base(), "--vocab-size"), "NullTokenizer needs --vocab-size"},
      {with(base(), {"--train-samples", "100"}), "--train-iters and --train-samples cannot be used together"},
      {with(base(), {"--lr-warmup-fraction", "0.1", "--lr-warmup-iters", "2"}), "can only specify one of --lr-warmup-fraction and --lr-warmup-iters"},
      {with(base(), {"--lr-decay-samples", "5"}), "--lr-decay-samples needs --train-samples"},
      {with(base(), {"--lr-warmup-samples", "5"}), "--lr-warmup-samples needs --train-samples"},
      {with(without(base(), "--train-iters"), {"--train-samples", "9", "--lr-decay-iters", "3"}), "--lr-decay-iters needs --train-iters"},
      {with(without(base(), "--train-iters"), {"--train-samples", "9", "--lr-warmup-iters", "3"}), "--lr-warmup-iters needs --train-iters"},
      {with(base(), {"--global-batch-size", "3"}), "global batch size (3) is not divisible by micro batch size (2) times data parallel size (1)"},
      {with(base(), {"--seq-length", "64"}), "max_position_embeddings (32) must be greater than or equal to seq_length (64)"},
      {with(base(), {"--num-attention-heads", "5"}), "--hidden-size (64) is not divisible by --num-attention-heads (5); give --kv-channels"},
      {with(base(), gqa), "--num-attention-heads (4) must be divisible by --num-query-groups (3)"},
      {with(base(), {"--save", "ckpt"}), "--save needs --save-interval"},
      {with(base(), {"--save", "ckpt", "--save-interval", "0"}), "--save-interval must be a positive integer, got 0"},
      {with(base(), {"--min-lr", "0.1"}), "--min-lr (0.1) must not exceed --lr (0.001)"},
      {with(base(), {"--lr-warmup-iters", "10"}), "warmup (20.0 samples) must be shorter than its decay (20 samples)"},
      {with(base(), {"--lr-decay-style", "WSD"}), "--lr-decay-style WSD needs the length of its annealing phase"},
      {with(base(), {"--mock-data", "--data-path", "x"}), "A single data source must be provided"},
      {with(base(), {"--split", "1,2,3,4"}), "--split \"1,2,3,4\" has 4 numbers; give at most three weights"},
      {with(base(), {"--split", "0,0"}), "the weights sum to zero; give at least one positive weight"},
      {with(base(), {"--seed", "0"}), "--seed must be a positive integer"},
      {with(base(), {"--num-layers", "0"}), "--num-layers must be a positive integer, got 0"},
      {with(base(), {"--num-layers", "two"}), "argument --num-layers: invalid int value: 'two'"},
      {with(base(), {"--lr", "1e-3x"}), "argument --lr: invalid float value: '1e-3x'"},
      {with(base(), {"--num-layers", "1.5"}), "argument --num-layers: invalid int value: '1.5'"},
      {with(base(), {"--normalization", "BatchNorm"}), "argument --normalization: invalid choice: 'BatchNorm' (choose from 'LayerNorm', 'RMSNorm')"},
      {with(base(), {"--lr-decay-style", "step"}), "argument --lr-decay-style: invalid choice: 'step'"},
      {with(base(), {"--optimizer", "adagrad"}), "argument --optimizer: invalid choice: 'adagrad'"},
      {with(base(), {"--tokenizer-type", "Foo"}), "argument --tokenizer-type: invalid choice: 'Foo'"},
      {with(base(), {"--lr"}), "argument --lr: expected one argument"},
      {with(base(), {"--lr", "-0.5"}), "--lr must be >= 0.0, got -0.5"},
      {with(base(), {"--data-path"}), "argument --data-path: expected at least one argument"},
      {with(base(), {"--swiglu=yes"}), "argument --swiglu: ignored explicit argument"},
      {with(base(), {"--fp16-lm-cross-entropy"}), "--fp16-lm-cross-entropy needs --fp16"},
      {with(base(), {"--fp32-residual-connection"}), "--fp32-residual-connection needs --fp16 or --bf16"},
      {with(base(), {"--overlap-param-gather"}), "--overlap-param-gather needs --overlap-grad-reduce"},
      {with(base(), {"--rotary-percent", "1.5"}), "--rotary-percent must be in (0, 1], got 1.5"},
      {with(base(), {"--adam-beta2", "1.0"}), "--adam-beta2 must be in [0, 1), got 1.0"},
      {with(base(), {"--start-weight-decay", "0.1"}), "--start-weight-decay and --end-weight-decay need --weight-decay-incr-style"},
      {with(base(), {"--tokenizer-type", "GPT2BPETokenizer"}), "--tokenizer-type GPT2BPETokenizer needs --vocab-file"},
      {with(base(), {"--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", "/nonexistent/vocab.json", "--merge-file", merges()}),
       "--vocab-file /nonexistent/vocab.json: no such file"},
      {with(base(), {"--tokenizer-type", "HuggingFaceTokenizer"}),
       "--tokenizer-type HuggingFaceTokenizer needs --tokenizer-model (a folder with tokenizer.json)"},
      {with(base(), {"--tokenizer-type", "Llama2Tokenizer", "--tokenizer-model", "/nonexistent/tokenizer.model"}),
       "--tokenizer-model /nonexistent/tokenizer.model: no such file"},
      {with(base(), {"--tokenizer-type", "TikTokenizer", "--tokenizer-model", merges()}),
       "--tokenizer-type TikTokenizer needs --tiktoken-pattern v1 or v2"},
      {with(base(), {"--tokenizer-type", "TikTokenizer", "--tokenizer-model", merges(), "--tiktoken-pattern", "v3"}),
       "--tiktoken-pattern must be v1 or v2, got 'v3'"},
      {with(base(), {"--vocab-extra-ids", "-1"}), "--vocab-extra-ids must be at least 0, got -1"},
      {with(base(), {"--eval-interval", "0"}), "--eval-interval must be a positive integer"},
      {with(base(), {"--log-interval", "-1"}), "--log-interval must be a positive integer, got -1"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.expected);
    expect_contains(problem_of(c.args), {c.expected});
  }
}

TEST(Arguments, MegatronsParallelRules) {
  const ParseOptions all = world(8);
  const Arguments a = parse_arguments(with(base(), {"--tensor-model-parallel-size", "2", "--sequence-parallel"}), all);
  EXPECT_EQ(a.parallel.data_parallel_size, 4);
  EXPECT_EQ(a.training.global_batch_size, 8);
  EXPECT_TRUE(a.parallel.sequence_parallel);
  EXPECT_EQ(num_microbatches(parse_arguments(with(base(), {"--global-batch-size", "32"}), all)), 2);
  expect_contains(problem_of(with(base(), {"--global-batch-size", "12"}), all),
                  {"global batch size (12) is not divisible by micro batch size (2) times data parallel size (8)"});
  expect_contains(problem_of(with(base(), {"--tensor-model-parallel-size", "3"}), all),
                  {"world size (8) is not divisible by tensor x pipeline x context parallel sizes (3)"});
  expect_contains(problem_of(with(base(), {"--tensor-model-parallel-size", "8"}), all),
                  {"--num-attention-heads (4) must be a multiple of --tensor-model-parallel-size (8)"});
  expect_contains(problem_of(with(base(), {"--tensor-model-parallel-size", "2", "--group-query-attention", "--num-query-groups", "1"}), all),
                  {"--num-query-groups (1) must be a multiple of --tensor-model-parallel-size (2)"});
  expect_contains(problem_of(with(base(), {"--pipeline-model-parallel-size", "4"}), all),
                  {"--num-layers (2) should be divisible by the pipeline-model-parallel size"});
  expect_contains(problem_of(with(base(), {"--context-parallel-size", "8", "--seq-length", "24"}), all),
                  {"--seq-length should be a multiple of 2 * --context-parallel-size"});
  // Context parallelism: Megatron's checks, and what the ring attention cannot do.
  const Args cp2 = with(base(), {"--context-parallel-size", "2", "--attention-dropout", "0"});
  EXPECT_EQ(parse_arguments(cp2, all).parallel.context_parallel_size, 2);
  expect_contains(problem_of(with(cp2, {"--tensor-model-parallel-size", "2", "--sequence-parallel", "--seq-length", "36"}), all),
                  {"--seq-length (36) must be a multiple of 2 x --context-parallel-size x --tensor-model-parallel-size (8) "
                   "with --sequence-parallel"});
  expect_contains(problem_of(with(cp2, {"--cp-comm-type", "a2a"}), all),
                  {"--cp-comm-type a2a is not supported by this build yet: context-parallel attention here is p2p "
                   "(the ring) or all_gather"});
  expect_contains(problem_of(with(cp2, {"--cp-comm-type", "p2p", "all_gather"}), all),
                  {"--cp-comm-type with one type per layer is not supported"});
  EXPECT_EQ(parse_arguments(with(cp2, {"--cp-comm-type", "all_gather"}), all).parallel.cp_comm_type,
            (std::vector<std::string>{"all_gather"}));
  // Megatron's default attention dropout (0.1) trains under context parallelism.
  EXPECT_DOUBLE_EQ(parse_arguments(with(base(), {"--context-parallel-size", "2"}), all).model.attention_dropout, 0.1);
  expect_contains(problem_of(with(cp2, {"--reset-attention-mask"}), all),
                  {"--reset-attention-mask with --context-parallel-size 2 is not supported"});
  expect_contains(problem_of(with(base(), {"--fp16", "--bf16"}), all), {"--fp16 and --bf16 cannot be used together"});
  // Every layout problem of one command line in one report, before any work.
  expect_contains(problem_of(with(base(), {"--tensor-model-parallel-size", "8", "--ffn-hidden-size", "36",
                                           "--group-query-attention", "--num-query-groups", "2", "--sequence-parallel",
                                           "--seq-length", "36", "--max-position-embeddings", "36",
                                           "--global-batch-size", "3", "--ddp-bucket-size", "0"}),
                             all),
                  {"--num-attention-heads (4) must be a multiple of --tensor-model-parallel-size (8)",
                   "--num-query-groups (2) must be a multiple of --tensor-model-parallel-size (8)",
                   "--ffn-hidden-size (36) must be divisible by --tensor-model-parallel-size (8)",
                   "--seq-length (36) must be divisible by --tensor-model-parallel-size (8) with --sequence-parallel",
                   "global batch size (3) is not divisible by micro batch size (2) times data parallel size (1)",
                   "--ddp-bucket-size"});
  std::vector<std::string> messages;
  const Arguments bf16 = parse_arguments(with(base(), {"--bf16"}), collecting(messages));
  EXPECT_EQ(bf16.precision.params_dtype, "torch.bfloat16");
  EXPECT_TRUE(bf16.precision.accumulate_allreduce_grads_in_fp32);
  expect_contains(messages.at(3), {"accumulate and all-reduce gradients in fp32 for bfloat16 data type."});
}

// The mixture-of-experts flags: Megatron's defaults and derived values (--moe-layer-freq's list
// form too), its checks with its messages, and what this build does not run yet refused by name.
TEST(Arguments, MixtureOfExperts) {
  const Args moe = with(base(), {"--num-experts", "8", "--disable-bias-linear", "--ffn-hidden-size", "96"});
  const Arguments a = parse_arguments(moe);
  EXPECT_EQ(a.moe.num_experts, 8);
  EXPECT_EQ(a.moe.moe_ffn_hidden_size, 96);  // defaults to --ffn-hidden-size
  EXPECT_EQ(a.moe.moe_router_topk, 2);
  EXPECT_EQ(a.parallel.expert_tensor_parallel_size, 1);  // defaults to --tensor-model-parallel-size
  const model::MoeConfig c = moe_config(parse_arguments(with(moe, {"--moe-router-score-function", "sigmoid",
      "--moe-z-loss-coeff", "1e-3", "--moe-expert-capacity-factor", "1.5", "--moe-token-drop-policy", "position",
      "--moe-router-load-balancing-type", "seq_aux_loss", "--moe-layer-freq", "2"})));
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.score_function, model::RouterScore::kSigmoid);
  EXPECT_DOUBLE_EQ(c.z_loss_coeff, 1e-3);
  EXPECT_DOUBLE_EQ(c.expert_capacity_factor, 1.5);
  EXPECT_EQ(c.token_drop_policy, model::TokenDropPolicy::kPosition);
  EXPECT_EQ(c.load_balancing, model::LoadBalancing::kSeqAuxLoss);
  EXPECT_EQ(c.layer_freq, 2);
  EXPECT_EQ(moe_config(parse_arguments(with(moe, {"--num-experts", "0"}))).num_experts, 0);  // Megatron: None
  const std::vector<std::pair<Args, std::string>> cases = {
      {with(moe, {"--moe-router-topk", "1"}), "Please use --moe-router-pre-softmax when topk is 1."},
      {with(moe, {"--moe-router-group-topk", "2"}), "When using group limited routing, moe_router_num_groups must be specified."},
      {with(moe, {"--moe-router-enable-expert-bias", "--moe-router-pre-softmax"}), "Expert bias for aux-loss-free routing only supports sigmoid"},
      {with(moe, {"--moe-shared-expert-overlap"}), "moe_shared_expert_overlap only works with alltoall token dispatcher."},
      {with(moe, {"--moe-router-load-balancing-type", "sinkhorn"}), "--moe-router-load-balancing-type sinkhorn is not supported by this build yet"},
      {with(moe, {"--moe-token-dispatcher-type", "flex"}), "--moe-token-dispatcher-type flex is not supported by this build yet"},
      {with(moe, {"--moe-router-dtype", "fp64"}), "--moe-router-dtype fp64 is not supported by this build yet"},
      {with(moe, {"--moe-token-dispatcher-type", "bogus"}), "argument --moe-token-dispatcher-type: invalid choice: 'bogus'"},
      {without(moe, "--disable-bias-linear"), "--num-experts without --disable-bias-linear is not supported by this build yet"},
      {with(moe, {"--moe-input-jitter-eps", "0.01"}), "--moe-input-jitter-eps is not supported by this build yet"},
  };
  for (const auto& [args, expected] : cases) {
    SCOPED_TRACE(expected);
    expect_contains(problem_of(args), {expected});
  }
  expect_contains(problem_of(with(moe, {"--num-experts", "6", "--expert-model-parallel-size", "4"}), world(4)),
                  {"Number of experts should be a multiple of expert model parallel_size."});
  const Arguments ep = parse_arguments(with(moe, {"--expert-model-parallel-size", "2"}), world(2));
  EXPECT_EQ(ep.parallel.expert_model_parallel_size, 2);
  // --moe-layer-freq's list form, resolved to the list Megatron prints.
  const Arguments listed = parse_arguments(with(moe, {"--num-layers", "4", "--moe-layer-freq", "([0]+[1]*3)"}));
  EXPECT_EQ(listed.moe.moe_layer_freq, "[0, 1, 1, 1]");
  EXPECT_EQ(moe_config(listed).layer_pattern, (std::vector<int>{0, 1, 1, 1}));
  expect_contains(problem_of(with(moe, {"--num-layers", "4", "--moe-layer-freq", "[1,0]"})),
                  {"Invalid length of moe_layer_pattern: 2, expected 4"});
  expect_contains(problem_of(with(moe, {"--moe-layer-freq", "[1,0"})), {"--moe-layer-freq '[1,0': ']' expected"});
  expect_contains(problem_of(with(moe, {"--tensor-model-parallel-size", "2"}), world(2)),
                  {"MoE and tensor parallelism are enabled without also enabling sequence parallelism"});
  EXPECT_EQ(parse_arguments(with(moe, {"--tensor-model-parallel-size", "2", "--sequence-parallel"}), world(2))
                .parallel.expert_tensor_parallel_size, 2);
  expect_contains(problem_of(with(moe, {"--tensor-model-parallel-size", "2", "--sequence-parallel",
                                        "--expert-tensor-parallel-size", "1"}), world(2)),
                  {"--expert-tensor-parallel-size 1 is not supported by this build yet"});
}

TEST(Arguments, RejectsWhatThisBuildCannotRunYet) {
  const std::vector<Invalid> cases = {
      {with(base(), {"--expert-model-parallel-size", "2"}), "num_experts must be non None to use expert model parallelism"},
      {with(base(), {"--fp8-format", "hybrid"}), "--fp8-format is not supported"},
      {with(base(), {"--position-embedding-type", "mrope"}), "--position-embedding-type mrope is not supported by this build yet"},
      {with(base(), {"--optimizer", "sgd"}), "--optimizer sgd is not supported by this build yet (supported: 'adam')"},
      {with(base(), {"--tokenizer-type", "BertWordPieceCase"}), "--tokenizer-type BertWordPieceCase is not supported"},
      {with(base(), {"--dataloader-type", "cyclic"}), "--dataloader-type cyclic is not supported"},
      {with(base(), {"--wandb-project", "p"}), "--wandb-project is not supported by this build yet: Weights & Biases logging"},
      {with(base(), {"--tensorboard-queue-size", "0"}), "--tensorboard-queue-size must be a positive integer"},
      {with(base(), {"--exit-duration-in-mins", "0"}), "--exit-duration-in-mins must be a positive integer"},
      {with(base(), {"--rampup-batch-size", "16", "16", "5859375"}), "--rampup-batch-size is not supported by this build yet"},
      {with(base(), {"--recompute-granularity", "full", "--recompute-num-layers", "1"}), "--recompute-granularity full needs --recompute-method uniform or block"},
      {with(base(), {"--recompute-activations", "--recompute-method", "block"}), "recompute method is not yet supported for selective recomputing granularity"},
      {with(base(), {"--recompute-activations", "--recompute-modules", "mlp"}), "--recompute-modules mlp is not supported"},
      {with(base(), {"--attention-backend", "triton"}), "argument --attention-backend: invalid choice: 'triton'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.expected);
    const std::string message = problem_of(c.args);
    expect_contains(message, {c.expected});
    EXPECT_EQ(message.find("problems"), std::string::npos) << "one problem expected: " << message;
  }
}

// Each choice flag answers a value outside Megatron's choices with argparse's words and Megatron's
// whole list (in Megatron's order, from its argparse definitions), and a Megatron choice this build
// lacks with what it does support.
TEST(Arguments, EveryChoiceFlagListsMegatronsChoices) {
  const std::vector<std::pair<std::string, std::string>> megatron = {
      {"--position-embedding-type", "'learned_absolute', 'rope', 'yarn', 'mrope', 'relative', 'none'"},
      {"--normalization", "'LayerNorm', 'RMSNorm'"},
      {"--attention-backend", "'flash', 'fused', 'unfused', 'local', 'auto'"},
      {"--recompute-granularity", "'full', 'selective'"},
      {"--recompute-method", "'uniform', 'block'"},
      {"--optimizer", "'adam', 'sgd', 'muon', 'dist_muon', 'lion', 'soap', 'adaptive_muon'"},
      {"--weight-decay-incr-style", "'constant', 'linear', 'cosine'"},
      {"--lr-decay-style", "'constant', 'linear', 'cosine', 'inverse-square-root', 'WSD'"},
      {"--lr-wsd-decay-style", "'exponential', 'linear', 'cosine', 'minus_sqrt'"},
      {"--dataloader-type", "'single', 'cyclic', 'external'"},
      {"--distributed-backend", "'nccl', 'gloo'"},
      {"--fp8-format", "'e4m3', 'hybrid'"},
      {"--tokenizer-type", "'BertWordPieceLowerCase', 'BertWordPieceCase', 'GPT2BPETokenizer', 'SentencePieceTokenizer', "
                           "'GPTSentencePieceTokenizer', 'HuggingFaceTokenizer', 'Llama2Tokenizer', 'TikTokenizer', "
                           "'MultimodalTokenizer', 'NullTokenizer', 'NullMultimodalTokenizer', 'SFTTokenizer'"},
  };
  for (const auto& [flag, choices] : megatron) {
    SCOPED_TRACE(flag);
    const std::string message = problem_of(with(base(), {flag, "bogus"}));
    expect_contains(message, {"argument " + flag + ": invalid choice: 'bogus' (choose from " + choices + ")"});
    EXPECT_EQ(message.find("problems"), std::string::npos) << "one problem expected: " << message;
  }
  expect_contains(problem_of(with(base(), {"--position-embedding-type", "yarn"})),
                  {"--position-embedding-type yarn is not supported by this build yet (supported: 'learned_absolute', 'rope')"});
  expect_contains(problem_of(with(base(), {"--dataloader-type", "external"})),
                  {"--dataloader-type external is not supported by this build yet (supported: 'single')"});
  expect_contains(problem_of(with(base(), {"--tokenizer-type", "MultimodalTokenizer"})),
                  {"(supported: 'GPT2BPETokenizer', 'HuggingFaceTokenizer', 'TikTokenizer', 'NullTokenizer', "
                   "'SentencePieceTokenizer', 'GPTSentencePieceTokenizer', 'Llama2Tokenizer')"});
}

TEST(Arguments, WeightDecayIncrementStylesNeedBothEnds) {
  const Arguments a = parse_arguments(with(base(), {"--weight-decay-incr-style", "linear", "--start-weight-decay", "0.01",
                                                    "--end-weight-decay", "0.1"}));
  EXPECT_EQ(a.optimizer.weight_decay_incr_style, WdIncrStyle::kLinear);
  EXPECT_EQ(*a.optimizer.start_weight_decay, 0.01);
  EXPECT_EQ(*a.optimizer.end_weight_decay, 0.1);
  expect_contains(problem_of(with(base(), {"--weight-decay-incr-style", "cosine", "--end-weight-decay", "0.1"})),
                  {"--weight-decay-incr-style cosine needs --start-weight-decay and --end-weight-decay"});
  expect_contains(problem_of(with(base(), {"--end-weight-decay", "0.1"})),
                  {"--start-weight-decay and --end-weight-decay need --weight-decay-incr-style linear or cosine"});
  expect_contains(problem_of(with(base(), {"--weight-decay-incr-style", "linear", "--start-weight-decay", "-1",
                                           "--end-weight-decay", "0.1"})),
                  {"--start-weight-decay"});
}

TEST(Arguments, SequenceParallelIsTurnedOffWithoutTensorParallelism) {
  std::vector<std::string> messages;
  const Arguments a = parse_arguments(with(base(), {"--sequence-parallel", "--use-flash-attn"}), collecting(messages));
  EXPECT_FALSE(a.parallel.sequence_parallel);
  expect_contains(messages.at(1), {"WARNING: --use-flash-attn is ignored"});
  EXPECT_EQ(messages.back(), "WARNING: Disabling sequence parallelism because tensor model parallelism is disabled");
}

TEST(Arguments, UnknownFlagNamesTheNearestKnownFlag) {
  expect_contains(problem_of(with(base(), {"--num-layer", "2"})), {"unknown flag --num-layer; did you mean --num-layers?"});
  expect_contains(problem_of(with(base(), {"--hiden-size=64"})), {"unknown flag --hiden-size; did you mean --hidden-size?"});
  expect_contains(problem_of(with(base(), {"stray"})), {"unexpected argument 'stray'"});
}

TEST(Arguments, ReportsAllProblemsTogether) {
  const std::string message = problem_of({"--num-layer", "2", "--hidden-size", "x", "--seq-length", "64", "--max-position-embeddings",
                                          "32", "--micro-batch-size", "2", "--train-iters", "5", "--tensor-model-parallel-size", "2"});
  expect_contains(message, {"invalid command line: ", "problems:", "\n  unknown flag --num-layer; did you mean --num-layers?",
                            "\n  argument --hidden-size: invalid int value: 'x'", "\n  --num-layers is required",
                            "\n  --num-attention-heads is required", "\n  --lr is required", "must be greater than or equal to seq_length",
                            "\n  --tokenizer-type is required", "world size (1) is not divisible by tensor x pipeline x context parallel sizes (2)"});
  EXPECT_EQ(message.find("multiple of --tensor-model-parallel-size"), std::string::npos) << message;
  EXPECT_EQ(message.find("--hidden-size is required"), std::string::npos) << "a bad value is reported once: " << message;
}

TEST(Arguments, OlderMegatronFlagsThatChangeNothingAreNoted) {
  // As guides written for Megatron v2.x-23.x pass them (spelled in full: the training parser
  // takes no abbreviations, as Megatron's sets allow_abbrev=False).
  std::vector<std::string> messages;
  parse_arguments(with(base(), {"--data-impl", "mmap", "--DDP-impl", "local", "--no-contiguous-buffers-in-local-ddp",
                                "--no-query-key-layer-scaling", "--use-cpu-initialization"}),
                  collecting(messages));
  for (const std::string expected : {"note: --data-impl mmap (from older Megatron versions) is accepted and changes nothing",
                                     "note: --DDP-impl local (from older Megatron versions) is accepted",
                                     "note: --no-contiguous-buffers-in-local-ddp (from older Megatron versions) is accepted",
                                     "note: --no-query-key-layer-scaling (from older Megatron versions) is accepted",
                                     "WARNING: --use-cpu-initialization is ignored"}) {
    EXPECT_EQ(std::count_if(messages.begin(), messages.end(), [&](const std::string& m) { return m.rfind(expected, 0) == 0; }), 1)
        << expected;
  }
  expect_contains(problem_of(with(base(), {"--data-impl", "lazy"})),
                  {"--data-impl lazy is not supported: only Megatron's mmap .bin/.idx datasets are read"});
  expect_contains(problem_of(with(base(), {"--data-impl", "fast"})),
                  {"argument --data-impl: invalid choice: 'fast' (choose from 'lazy', 'cached', 'mmap', 'infer')"});
  expect_contains(problem_of(with(base(), {"--checkpoint-activations"})), {"use --recompute-granularity"});
  expect_contains(problem_of(with(base(), {"--no-query-key-layer-scaling=1"})),
                  {"argument --no-query-key-layer-scaling: ignored explicit argument '1'"});
  expect_contains(problem_of(with(base(), {"--num-lay", "2"})), {"unknown flag --num-lay; did you mean --num-layers?"});
}

TEST(Arguments, NonFiniteFloatsAreRefusedNamingOnlyTheFlag) {
  // Every float flag; the message names the flag itself and no derived check piles on
  // (--lr nan used to blame --min-lr, --weight-decay nan the start/end weight decay).
  const std::vector<std::string> flags = {
      "--lr", "--min-lr", "--weight-decay", "--start-weight-decay", "--end-weight-decay", "--clip-grad", "--adam-beta1",
      "--adam-beta2", "--adam-eps", "--lr-warmup-fraction", "--lr-warmup-init", "--init-method-std", "--rotary-percent",
      "--norm-epsilon", "--attention-dropout", "--hidden-dropout", "--mid-level-dataset-surplus", "--loss-scale",
      "--initial-loss-scale", "--min-loss-scale", "--loss-scale-window"};
  for (const auto& flag : flags) {
    for (const std::string value : {"nan", "inf", "-inf", "Infinity", "1e400"}) {
      SCOPED_TRACE(flag + "=" + value);  // "=": argparse reads a lone "-inf" as a flag
      EXPECT_EQ(problem_of(with(base(), {flag + "=" + value})),
                "invalid command line: argument " + flag + ": " + value + " is not a finite number");
    }
  }
}

TEST(Arguments, RepeatedFlagTakesTheLastValueWithANote) {
  std::vector<std::string> messages;
  const Arguments a = parse_arguments(with(base(), {"--lr", "2e-3", "--data-path", "a", "--data-path", "b", "c"}),
                                      collecting(messages));
  EXPECT_EQ(a.optimizer.lr, 2e-3);
  EXPECT_EQ(a.data.data_path, (std::vector<std::string>{"b", "c"}));
  EXPECT_NE(std::find(messages.begin(), messages.end(), "note: --lr given 2 times; the last value (2e-3) is used"), messages.end());
  EXPECT_NE(std::find(messages.begin(), messages.end(), "note: --data-path given 2 times; the last values (b c) are used"),
            messages.end());
  messages.clear();
  parse_arguments(with(base(), {"--swiglu", "--swiglu"}), collecting(messages));
  for (const auto& m : messages) EXPECT_EQ(m.find("note: --swiglu"), std::string::npos) << m;
}

TEST(Arguments, HugeHiddenSizeNamesTheFlagInsteadOfOverflowing) {
  for (const Args& extra : {Args{}, Args{"--swiglu"}}) {
    const std::string error = problem_of(with(base(), with({"--hidden-size", "2000000000"}, extra)));
    SCOPED_TRACE(error);
    EXPECT_EQ(error.rfind("invalid command line: --hidden-size 2000000000 is too large: the MLP size it implies", 0), 0u);
    EXPECT_EQ(error.find("problems"), std::string::npos);  // one problem, nothing derived piles on
  }
  // The largest --hidden-size whose 4h still fits is accepted (memory is the preflight's, per rank).
  EXPECT_NO_THROW(parse_arguments(with(base(), {"--hidden-size", "536870912", "--ffn-hidden-size", "64"})));
}

// Memory is checked per rank once the layout exists (memory_preflight.h), not against this host's
// memory at parse time: the GPT-3 175B example (examples/gpt3/175b.env) parses at its world size.
TEST(Arguments, TheGpt3_175bExampleParsesAtItsWorldSize) {
  const Arguments a = parse_arguments(
      {"--num-layers", "96", "--hidden-size", "12288", "--num-attention-heads", "96", "--seq-length", "2048",
       "--max-position-embeddings", "2048", "--micro-batch-size", "1", "--global-batch-size", "1536",
       "--train-iters", "500000", "--lr", "6e-5", "--tensor-model-parallel-size", "8",
       "--pipeline-model-parallel-size", "16", "--sequence-parallel", "--use-distributed-optimizer",
       "--num-layers-per-virtual-pipeline-stage", "3", "--bf16", "--tokenizer-type", "NullTokenizer",
       "--vocab-size", "50257"},
      world(1024));
  EXPECT_EQ(a.parallel.data_parallel_size, 8);
  EXPECT_EQ(num_microbatches(a), 192);
}

TEST(DerivedValues, PaddedVocabSizeBelowTheTokenizersIsRefused) {
  const Arguments a = parse_arguments(with(base(), {"--padded-vocab-size", "100"}));
  EXPECT_EQ(padded_vocab_size(a, 100), 100);
  EXPECT_EQ(padded_vocab_size(a, 60), 100);
  expect_contains(error_of([&] { padded_vocab_size(a, 50257); }),
                  {"--padded-vocab-size 100 is smaller than the tokenizer's vocabulary (50257 tokens)", "give at least 50257",
                   "padded to 50304"});
  const Arguments tp2 = parse_arguments(with(base(), {"--padded-vocab-size", "101", "--tensor-model-parallel-size", "2"}),
                                        world(2));
  expect_contains(error_of([&] { padded_vocab_size(tp2, 100); }),
                  {"--padded-vocab-size 101 is not divisible by --tensor-model-parallel-size 2"});
}

TEST(Arguments, HelpListsTheFlags) {
  EXPECT_TRUE(help_requested({"--num-layers", "2", "--help"}));
  EXPECT_FALSE(help_requested(base()));
  expect_contains(help_text(), {"--num-layers", "--tensor-model-parallel-size", "--lr-warmup-fraction"});
}

}  // namespace
}  // namespace megatron::train
