// Validation of pretrain_gpt.py's flags: each of Megatron's rules with its message, the parallel
// layout's rules, the mixture-of-experts flags, and what this build refuses by name.
#include <gtest/gtest.h>

#include "argument_test_support.h"
#include "megatron/model/model_config.h"
#include "megatron/train/arguments.h"
#include "test_support.h"

namespace megatron::train {
namespace {

using megatron::testing::expect_contains;
using namespace testing;  // the command lines

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
  // The experts' own TP size: any that fits the world and divides TP or is a multiple of it.
  const Args tp2 = with(moe, {"--tensor-model-parallel-size", "2", "--sequence-parallel"});
  EXPECT_EQ(parse_arguments(with(tp2, {"--expert-tensor-parallel-size", "1", "--expert-model-parallel-size", "2"}),
                            world(2)).parallel.expert_tensor_parallel_size, 1);
  EXPECT_EQ(parse_arguments(with(moe, {"--expert-tensor-parallel-size", "2"}), world(2))
                .parallel.expert_tensor_parallel_size, 2);
  expect_contains(problem_of(with(moe, {"--expert-tensor-parallel-size", "5"}), world(5)),
                  {"--moe-ffn-hidden-size (96) must be divisible by --expert-tensor-parallel-size (5)"});
  expect_contains(problem_of(with(tp2, {"--expert-tensor-parallel-size", "3", "--moe-ffn-hidden-size", "96"}), world(6)),
                  {"--expert-tensor-parallel-size 3 must divide --tensor-model-parallel-size 2 or be a multiple of it"});
  expect_contains(problem_of(with(moe, {"--expert-tensor-parallel-size", "2", "--expert-model-parallel-size", "2"}),
                             world(2)),
                  {"decoder world_size (2) is not divisible by expert_tensor_model_pipeline_parallel size (4)"});
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

}  // namespace
}  // namespace megatron::train
