// The argument dump in Megatron's exact format, the JSON round trip, and the values derived after
// the dump (scheduler steps, iterations).
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "megatron/model/model_config.h"
#include "megatron/train/arguments.h"
#include "test_support.h"

namespace megatron::train {
namespace {

using megatron::testing::error_of;
using megatron::testing::expect_contains;
using Args = std::vector<std::string>;

Args base() {
  return {"--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
          "--max-position-embeddings", "32", "--micro-batch-size", "2", "--train-iters", "10", "--lr", "1.5e-4",
          "--tokenizer-type", "NullTokenizer", "--vocab-size", "100"};
}
Args with(Args args, const Args& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool has_line(const std::vector<std::string>& lines, const std::string& line) {
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

TEST(ArgumentDump, PrintsMegatronsExactLines) {
  const Arguments a = parse_arguments(with(base(), {"--data-path", "0.3", "a", "0.7", "it's", "--no-load-optim", "--split", "949,50,1"}));
  const auto lines = lines_of(format_argument_dump(a));
  ASSERT_GE(lines.size(), 3u);
  EXPECT_EQ(lines.front(), "------------------------ arguments ------------------------");
  EXPECT_EQ(lines.back(), "-------------------- end of arguments ---------------------");
  const std::vector<std::string> expected = {
      "  num_layers ...................................... 2",
      "  hidden_size ..................................... 64",
      "  ffn_hidden_size ................................. 256",
      "  lr .............................................. 0.00015",
      "  adam_eps ........................................ 1e-08",
      "  norm_epsilon .................................... 1e-05",
      "  weight_decay .................................... 0.01",
      "  rotary_percent .................................. 1.0",
      "  swiglu .......................................... False",
      "  add_bias_linear ................................. True",
      "  train_samples ................................... None",
      "  no_load_optim ................................... True",
      "  no_save_optim ................................... None",
      "  position_embedding_type ......................... learned_absolute",
      "  normalization ................................... LayerNorm",
      "  data_path ....................................... ['0.3', 'a', '0.7', \"it's\"]",
      "  split ........................................... 949,50,1",
      "  cp_comm_type .................................... ['p2p']",
      "  initial_loss_scale .............................. 4294967296",
      "  loss_scale_window ............................... 1000",
      "  params_dtype .................................... torch.float32",
      "  world_size ...................................... 1",
      "  tokenizer_type .................................. NullTokenizer",
      "  lr_decay_style .................................. linear",
      "  untie_embeddings_and_output_weights ............. False",
      "  attention_backend ............................... AttnBackend.auto",  // a Python enum there
      "  recompute_granularity ........................... None",
  };
  for (const auto& line : expected) EXPECT_TRUE(has_line(lines, line)) << "missing: '" << line << "'";
  // Python's sorted(key=str.lower) over the whole lines.
  for (std::size_t i = 2; i + 1 < lines.size(); ++i) {
    std::string x = lines[i - 1], y = lines[i];
    std::transform(x.begin(), x.end(), x.begin(), ::tolower);
    std::transform(y.begin(), y.end(), y.begin(), ::tolower);
    EXPECT_LE(x, y) << "line " << i;
  }
}

TEST(ArgumentDump, DotsFillTo48ColumnsAfterTheName) {
  const auto lines = lines_of(format_argument_dump(parse_arguments(base())));
  for (std::size_t i = 1; i + 1 < lines.size(); ++i) {
    const std::string& line = lines[i];
    const std::string name = line.substr(2, line.find(' ', 2) - 2);
    ASSERT_LT(name.size(), 48u) << line;
    const std::string prefix = "  " + name + " " + std::string(48 - name.size(), '.') + " ";
    EXPECT_EQ(line.rfind(prefix, 0), 0u) << line;
  }
}

TEST(ArgumentDump, AfterLoadingFloatLossScaleWindowPrintsAsFloat) {
  const Arguments a = parse_arguments(with(base(), {"--loss-scale-window", "500", "--initial-loss-scale", "65536"}));
  const auto lines = lines_of(format_argument_dump(a));
  EXPECT_TRUE(has_line(lines, "  loss_scale_window ............................... 500.0"));
  EXPECT_TRUE(has_line(lines, "  initial_loss_scale .............................. 65536.0"));
}

TEST(ArgumentDump, WorldSizeLine) {
  Arguments a;
  a.parallel.world_size = 16;
  a.parallel.data_parallel_size = 2;
  a.parallel.tensor_model_parallel_size = 8;
  EXPECT_EQ(format_world_size_line(a),
            "using world size: 16, data-parallel size: 2, context-parallel size: 1, hierarchical context-parallel sizes: "
            "None, tensor-model-parallel size: 8, pipeline-model-parallel size: 1");
}

TEST(ArgumentJson, RoundTripsEveryField) {
  const Arguments a = parse_arguments(with(base(), {"--data-path", "0.3", "a", "0.7", "b", "--save", "ckpt", "--save-interval",
                                                    "5", "--swiglu", "--normalization", "RMSNorm", "--lr-warmup-fraction",
                                                    "0.01", "--position-embedding-type", "rope", "--disable-bias-linear"}));
  const std::string text = to_json(a);
  EXPECT_EQ(from_json(text), a);
  EXPECT_EQ(to_json(from_json(text)), text);
  expect_contains(text, {"\"num_layers\": 2", "\"normalization\": \"RMSNorm\"", "\"train_samples\": null",
                         "\"lr\": 0.00015", "\"data_path\": [", "\"add_bias_linear\": false"});
  Arguments odd;
  odd.optimizer.lr = std::numeric_limits<double>::infinity();
  odd.data.test_data_path = std::vector<std::string>{"x"};
  EXPECT_EQ(from_json(to_json(odd)), odd);
}

TEST(ArgumentJson, RejectsUnknownNamesAndWrongTypes) {
  const std::string message = error_of([] {
    from_json(R"({"num_layers": "2", "bogus": 1, "lr": "fast", "normalization": "BatchNorm", "seed": 1.5, "data_path": [1]})");
  });
  expect_contains(message, {"invalid arguments JSON: 6 problems", "'num_layers': expected an integer, got \"2\"",
                            "unknown argument 'bogus'", "'lr': expected null or a number", "'normalization': expected one of 'LayerNorm', 'RMSNorm'",
                            "'seed': expected an integer, got 1.5", "'data_path': expected null or a list of strings"});
  expect_contains(error_of([] { from_json("{not json"); }), {"invalid arguments JSON: "});
  expect_contains(error_of([] { from_json("[1, 2]"); }), {"expected an object"});
  EXPECT_EQ(from_json("{}"), Arguments{});
}

// The flags ModelConfig::flags() prints (an HF import's command line) are megatron_train's: parsed
// and resolved they give back the same model, for a model that sets every printable field.
TEST(DerivedValues, ModelFlagsReadBackAsTheSameModel) {
  model::ModelConfig c;
  c.num_layers = 4;
  c.hidden_size = 96;
  c.ffn_hidden_size = 160;
  c.num_attention_heads = 6;
  c.num_query_groups = 2;
  c.kv_channels = 24;
  c.seq_length = c.max_position_embeddings = 64;
  c.position_embedding = model::PositionEmbedding::kRope;
  c.rotary_base = 500000;
  c.rotary_percent = 0.5;
  c.normalization = model::Normalization::kRmsNorm;
  c.norm_epsilon = 1e-6;
  c.swiglu = true;
  c.qk_layernorm = true;
  c.untie_embeddings_and_output_weights = true;
  c.add_bias_linear = false;
  c.init_method_std = 0.008;
  c.attention_dropout = 0.0;
  c.hidden_dropout = 0.05;
  c.padded_vocab_size = 512;
  c.bias_activation_fusion = false;
  c.moe.num_experts = 4;
  c.moe.layer_pattern = {1, 0, 1, 1};
  c.moe.ffn_hidden_size = 48;
  c.moe.router_topk = 3;
  c.moe.router_pre_softmax = true;
  c.moe.aux_loss_coeff = 0.01;
  c.moe.z_loss_coeff = 0.001;
  const std::vector<std::string> flags = c.flags();
  Args args = {"--micro-batch-size", "2", "--train-iters", "10", "--lr", "1e-3", "--tokenizer-type", "NullTokenizer",
               "--vocab-size", "100"};
  args.insert(args.end(), flags.begin(), flags.end());
  const Arguments parsed = parse_arguments(args);
  model::ModelConfig back = model_config(parsed);
  back.padded_vocab_size = parsed.tokenizer.padded_vocab_size.value_or(0);
  EXPECT_EQ(back.to_json(), c.to_json());
  // A dense GPT-2 shape: its sizes, dropout, init and epsilon, nothing of experts or SwiGLU.
  const std::vector<std::string> dense = model::ModelConfig{}.flags();
  EXPECT_EQ(std::count(dense.begin(), dense.end(), std::string("--num-experts")), 0);
  EXPECT_EQ(std::count(dense.begin(), dense.end(), std::string("--swiglu")), 0);
  EXPECT_EQ(std::count(dense.begin(), dense.end(), std::string("--num-layers")), 1);
}

TEST(DerivedValues, SchedulerStepsAreInSamplesAsMegatronComputesThem) {
  const Arguments it = parse_arguments(with(base(), {"--global-batch-size", "8", "--lr-decay-iters", "8", "--lr-warmup-fraction", "0.25",
                                                     "--lr-decay-style", "WSD", "--lr-wsd-decay-iters", "2", "--min-lr", "1e-5"}));
  const optim::SchedulerConfig s = scheduler_config(it);
  EXPECT_EQ(s.decay_steps, 64);
  EXPECT_DOUBLE_EQ(s.warmup_steps, 16.0);
  EXPECT_EQ(s.wsd_decay_steps, 16);
  EXPECT_EQ(s.wd_incr_steps, 80);
  EXPECT_DOUBLE_EQ(s.max_lr, 1.5e-4);
  EXPECT_DOUBLE_EQ(s.min_lr, 1e-5);
  EXPECT_EQ(s.decay_style, LrDecayStyle::kWsd);
  EXPECT_EQ(total_train_iters(it), 10);
  EXPECT_EQ(scheduler_config(parse_arguments(with(base(), {"--lr-warmup-iters", "3"}))).warmup_steps, 6.0);
  EXPECT_EQ(scheduler_config(parse_arguments(base())).decay_steps, 20);

  Args samples = base();
  samples[13] = "1000";
  samples[12] = "--train-samples";
  const Arguments sa = parse_arguments(with(samples, {"--global-batch-size", "8", "--lr-warmup-samples", "100"}));
  EXPECT_EQ(total_train_iters(sa), 125);
  EXPECT_EQ(scheduler_config(sa).decay_steps, 1000);
  EXPECT_DOUBLE_EQ(scheduler_config(sa).warmup_steps, 100.0);
  EXPECT_FALSE(sa.training.train_iters.has_value());
}

}  // namespace
}  // namespace megatron::train
