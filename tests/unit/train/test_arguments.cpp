// Parsing and validation of pretrain_gpt.py's flags: Megatron's defaults, derived values, every
// validation rule, all problems reported together, and what this build rejects.
#include <gtest/gtest.h>

#include <algorithm>

#include "megatron/model/model_config.h"
#include "megatron/train/arguments.h"
#include "argument_test_support.h"
#include "test_support.h"

namespace megatron::train {
namespace {

using namespace testing;  // the command lines

using megatron::testing::error_of;
using megatron::testing::expect_contains;

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

// Megatron's flags that this build accepts but that change nothing here say so, each once, as the
// catalogue's ignored flags do; a flag that acts says nothing.
TEST(Arguments, AcceptedFlagsThatChangeNothingWarn) {
  std::vector<std::string> messages;
  parse_arguments(with(base(), {"--no-bias-dropout-fusion", "--distributed-backend", "nccl", "--use-flash-attn",
                                "--fp16-lm-cross-entropy", "--fp16", "--swiglu"}),
                  collecting(messages));
  const auto count = [&](const std::string& prefix) {
    return std::count_if(messages.begin(), messages.end(), [&](const std::string& m) { return m.starts_with(prefix); });
  };
  EXPECT_EQ(count("WARNING: --no-bias-dropout-fusion is ignored: a kernel choice in Megatron"), 1);
  EXPECT_EQ(count("WARNING: --distributed-backend is ignored: ranks use NCCL on GPUs and MPI on CPUs"), 1);
  EXPECT_EQ(count("WARNING: --use-flash-attn is ignored: a kernel choice in Megatron"), 1);
  EXPECT_EQ(count("WARNING: --fp16-lm-cross-entropy is ignored: the cross entropy always computes in fp32"), 1);
  EXPECT_EQ(count("WARNING: --swiglu "), 0);
  EXPECT_EQ(count("WARNING: --fp16 "), 0);
}

TEST(Arguments, InfersGpt2TokenizerFromVocabAndMergeFiles) {
  std::vector<std::string> messages;
  Args args = without(without(base(), "--tokenizer-type"), "--vocab-size");
  const Arguments a = parse_arguments(with(args, {"--vocab-file", vocab(), "--merge-file", merges()}), collecting(messages));
  EXPECT_EQ(a.tokenizer.tokenizer_type, tokenizer::TokenizerType::kGpt2Bpe);
  EXPECT_NE(std::find(messages.begin(), messages.end(),
                      "WARNING: --tokenizer-type not given; using GPT2BPETokenizer for --vocab-file and --merge-file"),
            messages.end());
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
