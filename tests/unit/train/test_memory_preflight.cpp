// The memory preflight: parameter counts per TP rank and pipeline chunk against the model's own
// parameters and the GPT-3 paper's count, the bytes per parameter Megatron states for each
// precision and optimizer, and the refusal message for layouts that cannot fit a stated device.
#include "megatron/train/memory_preflight.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include "../model/tiny_model_config.h"
#include "megatron/core/check.h"
#include "megatron/model/gpt_model.h"
#include "megatron/parallel/single_process_context.h"
#include "test_support.h"

namespace megatron::train {
namespace {

using megatron::testing::expect_contains;

// This TP rank's share of a model built in one process: split tensors count 1/tp.
std::int64_t shard_count(const model::GptModel& m, int tp) {
  std::int64_t count = 0;
  const auto& layouts = m.parameter_layouts();
  for (std::size_t i = 0; i < layouts.size(); ++i) {
    const std::int64_t n = m.named_parameters()[i].second.numel();
    count += layouts[i].sharded() ? n / tp : n;
  }
  return count;
}

std::vector<model::ModelConfig> variants() {
  std::vector<model::ModelConfig> out(5, megatron::testing::tiny_config());
  out[0].num_layers = 4;
  out[1].num_layers = 4;
  out[1].swiglu = true;
  out[1].normalization = model::Normalization::kRmsNorm;
  out[1].position_embedding = model::PositionEmbedding::kRope;
  out[1].add_bias_linear = false;
  out[2].num_layers = 4;
  out[2].untie_embeddings_and_output_weights = true;
  out[2].num_query_groups = 2;
  out[3] = out[1];
  out[3].untie_embeddings_and_output_weights = true;
  out[4].num_layers = 3;
  out[4].num_query_groups = 4;
  return out;
}

TEST(MemoryPreflight, ParameterCountEqualsTheModelsParametersForEveryTpRankAndChunk) {
  for (const model::ModelConfig& c : variants()) {
    for (const int tp : {1, 2, 4}) {
      // Every split of the layers into a first, middle and last chunk, and the whole model.
      for (int first_layers = 0; first_layers <= c.num_layers; ++first_layers) {
        for (const auto& [first, count, pre, post] :
             std::vector<std::tuple<int, int, bool, bool>>{{0, first_layers, true, false},
                                                           {first_layers, c.num_layers - first_layers, false, true},
                                                           {0, first_layers, false, false},
                                                           {0, c.num_layers, true, true}}) {
          const parallel::ParameterInit gen(1);
          const model::GptModel m(c, parallel::single_process_context(), gen, model::StageSpec{first, count, pre, post});
          SCOPED_TRACE(::testing::Message() << "tp " << tp << " layers " << count << " pre " << pre << " post " << post
                                          << " swiglu " << c.swiglu << " untied " << c.untie_embeddings_and_output_weights);
          EXPECT_EQ(c.num_parameters(tp, count, pre, post), shard_count(m, tp));
        }
      }
    }
  }
}

model::ModelConfig gpt3_175b() {
  model::ModelConfig c;
  c.num_layers = 96;
  c.hidden_size = 12288;
  c.ffn_hidden_size = 4 * 12288;
  c.num_attention_heads = 96;
  c.num_query_groups = 96;
  c.kv_channels = 128;
  c.seq_length = 2048;
  c.max_position_embeddings = 2048;
  c.padded_vocab_size = 51200;  // 50257 padded to a multiple of 128 x TP 8
  return c;
}

TEST(MemoryPreflight, TheGpt3_175bCountIsThePapersFormula) {
  // Narayanan et al. 2021: P = 12 l h^2 (1 + 13 / 12h + (V + s) / 12lh); Megatron's model also has
  // the final LayerNorm (2h).
  const model::ModelConfig c = gpt3_175b();
  const std::int64_t l = 96, h = 12288, v = 51200, s = 2048;
  EXPECT_EQ(c.num_parameters(), 12 * l * h * h + 13 * l * h + (v + s) * h + 2 * h);
  EXPECT_NEAR(static_cast<double>(c.num_parameters()), 174.6e9, 0.1e9);
}

RankShare share_175b(int pp, int pp_rank, int dp, std::vector<std::int64_t> chunk_layers) {
  return RankShare{pp_rank * 8, 8, 0, pp, pp_rank, dp, std::move(chunk_layers)};
}

MemorySettings bf16(bool distributed_optimizer) {
  MemorySettings m;
  m.param_bytes = 2;
  m.grad_in_fp32 = true;
  m.distributed_optimizer = distributed_optimizer;
  return m;
}

const DeviceMemory kGpu80{80'000'000'000, "cuda:0 (an 80 GB GPU)"};

// Mixtral 8x7B as Megatron-LM's example trains it (untied, RMSNorm, SwiGLU, RoPE, GQA 8 groups,
// 8 experts of FFN 14336, no biases).
model::ModelConfig mixtral_8x7b() {
  model::ModelConfig c;
  c.num_layers = 32;
  c.hidden_size = 4096;
  c.ffn_hidden_size = 14336;
  c.num_attention_heads = 32;
  c.num_query_groups = 8;
  c.kv_channels = 128;
  c.seq_length = 4096;
  c.max_position_embeddings = 32768;
  c.normalization = model::Normalization::kRmsNorm;
  c.position_embedding = model::PositionEmbedding::kRope;
  c.swiglu = true;
  c.add_bias_linear = false;
  c.untie_embeddings_and_output_weights = true;
  c.padded_vocab_size = 32000;
  c.moe.num_experts = 8;
  c.moe.router_topk = 2;
  return c;
}

TEST(MemoryPreflight, ExpertParallelRanksHoldTheirShareOfTheExperts) {
  const model::ModelConfig c = mixtral_8x7b();
  // The count HuggingFace gives for mistralai/Mixtral-8x7B-v0.1 (46.7B).
  EXPECT_EQ(c.num_parameters(), 46'702'792'704);
  const std::int64_t experts = 32LL * 8 * 3 * 14336 * 4096;  // w1, w3, w2 of every expert of every layer
  EXPECT_EQ(c.num_expert_parameters(1, 32), experts);
  EXPECT_EQ(c.num_parameters(1, 32, true, true, 8), c.num_parameters() - experts / 8 * 7);
  // Megatron-LM's example layout: TP1 PP4 EP8 on 64 GPUs (DP 16, expert DP 2), bf16, distributed
  // optimizer. A stage holds 8 layers: their dense part whole, 1 of each layer's 8 experts.
  RankShare share{0, 1, 0, 4, 1, 16, {8}, 8, 2};
  const MemoryNeed need = rank_memory_need(c, share, bf16(true));
  const std::int64_t stage_experts = experts / 4 / 8, dense = c.num_parameters(1, 8, false, false) - experts / 4;
  EXPECT_EQ(need.parameters, dense + stage_experts);
  EXPECT_EQ(need.optimizer_bytes, 12 * ((dense + 15) / 16 + (stage_experts + 1) / 2));
  EXPECT_NO_THROW(check_memory_fits(c, share, bf16(true), kGpu80));
  EXPECT_LT(need.total(), 20'000'000'000);
  // Without expert parallelism the stage holds all 8 experts of its layers (11.3B parameters).
  share.ep = 1;
  share.expert_dp = 16;
  const MemoryNeed whole = rank_memory_need(c, share, bf16(true));
  EXPECT_EQ(whole.parameters, dense + 8 * stage_experts);
  EXPECT_GT(whole.total(), 75'000'000'000);
  // DeepSeek-style TP2 with the experts unsplit (expert TP 1) at EP8: the dense part halves, each
  // rank keeps its whole experts (expert DP 64 / (4 x 8) = 2).
  const RankShare etp1{0, 2, 0, 4, 1, 8, {8}, 8, 2, 1};
  const std::int64_t dense_tp2 = c.num_parameters(2, 8, false, false) - experts / 4 / 2;
  EXPECT_EQ(rank_memory_need(c, etp1, bf16(true)).parameters, dense_tp2 + stage_experts);
  // Split over expert TP 2 as well: half of them.
  const RankShare etp2{0, 2, 0, 4, 1, 8, {8}, 8, 1, 2};
  EXPECT_EQ(rank_memory_need(c, etp2, bf16(true)).parameters, dense_tp2 + stage_experts / 2);
}

TEST(MemoryPreflight, AMixtureOfExpertsThatCannotFitNamesTheExpertsAndExpertParallelism) {
  const model::ModelConfig c = mixtral_8x7b();
  const RankShare share{0, 1, 0, 2, 1, 16, {16}, 1, 16};  // all 8 experts of 16 layers on one rank
  const std::string error = megatron::testing::error_of([&] { check_memory_fits(c, share, bf16(false), kGpu80); });
  expect_contains(error, {"mostly the experts (--num-experts 8 x --moe-ffn-hidden-size 14336 x --hidden-size 4096 in 16 layers, "
                          "all on this rank: --expert-model-parallel-size 1)",
                          "spread the experts over more ranks (--expert-model-parallel-size)"});
  EXPECT_EQ(error.find("--ffn-hidden-size"), std::string::npos) << error;
}

TEST(MemoryPreflight, Gpt3_175bAtTp8Pp16Dp8InBf16FitsAn80GbGpu) {
  const model::ModelConfig c = gpt3_175b();
  for (int pp_rank = 0; pp_rank < 16; ++pp_rank) {
    const RankShare share = share_175b(16, pp_rank, 8, {3, 3});  // 3 layers per virtual stage, 2 chunks
    const MemoryNeed need = rank_memory_need(c, share, bf16(true));
    // Megatron's distributed optimizer: 2 (bf16 weights) + 4 (fp32 gradients) + 12 / DP bytes each.
    EXPECT_EQ(need.parameter_bytes, 2 * need.parameters);
    EXPECT_EQ(need.gradient_bytes, 4 * need.parameters);
    EXPECT_EQ(need.optimizer_bytes, 12 * ((need.parameters + 7) / 8));
    EXPECT_NO_THROW(check_memory_fits(c, share, bf16(true), kGpu80));
    // About 6 of the 96 layers' 12h^2 over 8 TP ranks: 1.36e9 parameters, about 10 GB.
    EXPECT_GT(need.parameters, 1'350'000'000);
    EXPECT_LT(need.parameters, 1'470'000'000);
    EXPECT_LT(need.total(), 12'000'000'000);
  }
  // The TP ranks of all stages hold the whole model: 16 stages x 8 shards, plus the replicated
  // norms, row-parallel biases and position embeddings 7 more times, plus the tied output layer's
  // copy on the last stage.
  std::int64_t all = 0;
  for (int pp_rank = 0; pp_rank < 16; ++pp_rank) all += rank_memory_need(c, share_175b(16, pp_rank, 8, {3, 3}), bf16(true)).parameters;
  const std::int64_t h = 12288, replicated_per_layer = 4 * h + 2 * h;  // two LayerNorms, proj and fc2 biases
  EXPECT_EQ(8 * all, c.num_parameters() + 7 * (96 * replicated_per_layer + 2 * h + 2048 * h) + 51200 * h);
}

TEST(MemoryPreflight, ALayoutThatCannotFitIsRefusedNamingTheRanksNeedAndTheDevice) {
  const model::ModelConfig c = gpt3_175b();
  // PP 2 without the distributed optimizer: 48 layers on each rank, 18 bytes per parameter.
  const RankShare share = share_175b(2, 1, 64, {48});
  const MemoryNeed need = rank_memory_need(c, share, bf16(false));
  EXPECT_EQ(need.total(), 18 * need.parameters);
  const std::string error = megatron::testing::error_of([&] { check_memory_fits(c, share, bf16(false), kGpu80); });
  expect_contains(error, {"rank 8 (tensor 1/8, pipeline 2/2, data-parallel size 64) needs at least ",
                          str_cat("(", need.total(), " bytes)"),
                          "cuda:0 (an 80 GB GPU) has 74.51 GiB (80000000000 bytes)", "mostly the transformer layers",
                          "--use-distributed-optimizer", "--pipeline-model-parallel-size"});
  // With it, all 96 layers on each rank still do not fit (21.7e9 parameters x (6 + 12/128) bytes),
  // 48 of them do (10.9e9 x (6 + 12/64) bytes: 67 GB).
  EXPECT_THROW(check_memory_fits(c, share_175b(1, 0, 128, {96}), bf16(true), kGpu80), Error);
  EXPECT_NO_THROW(check_memory_fits(c, share_175b(2, 0, 64, {48}), bf16(true), kGpu80));
}

TEST(MemoryPreflight, ExplicitAttentionScoresAreCountedAndNameTheSequenceLength) {
  model::ModelConfig c = megatron::testing::tiny_config();
  c.seq_length = 100'000'000;
  c.max_position_embeddings = c.seq_length;
  MemorySettings settings;
  settings.micro_batch_size = 2;
  const RankShare share{0, 1, 0, 1, 0, 1, {2}};
  EXPECT_EQ(rank_memory_need(c, share, settings).score_bytes, 0);  // SDPA never holds them
  settings.explicit_attention = true;
  EXPECT_EQ(rank_memory_need(c, share, settings).score_bytes, std::int64_t{2} * 4 * c.seq_length * c.seq_length * 4);
  const std::string error =
      megatron::testing::error_of([&] { check_memory_fits(c, share, settings, {std::int64_t{1} << 40, "cpu"}); });
  expect_contains(error, {"one layer's attention scores ([2, 4, 100000000, 100000000] in fp32", "lower --seq-length"});
}

TEST(MemoryPreflight, SizesPast63BitsSaturateInsteadOfWrapping) {
  model::ModelConfig c = megatron::testing::tiny_config();
  c.num_layers = 2'000'000'000;
  c.hidden_size = 500'000'000;
  c.ffn_hidden_size = 1;
  const RankShare share{0, 1, 0, 1, 0, 1, {c.num_layers}};
  EXPECT_EQ(rank_memory_need(c, share, {}).total(), std::numeric_limits<std::int64_t>::max());
  expect_contains(megatron::testing::error_of([&] { check_memory_fits(c, share, {}, {std::int64_t{1} << 40, "cpu"}); }),
                  {"needs at least more than 2^63 bytes"});
}

TEST(MemoryPreflight, AFusedQkvPastTheIntRangeIsCountedIn64Bits) {
  model::ModelConfig c = megatron::testing::tiny_config();
  c.num_attention_heads = c.num_query_groups = 1;
  c.kv_channels = 1'000'000'000;  // 3e9 QKV rows: past INT_MAX
  // The QKV weight alone: 3e9 rows x 48 columns, plus their biases.
  EXPECT_GT(c.num_parameters(1, 1, false, false), std::int64_t{3'000'000'000} * 49);
}

TEST(MemoryPreflight, CpuRanksShareTheHostsMemory) {
  const DeviceMemory one = device_memory(at::kCPU, 1);
  const DeviceMemory four = device_memory(at::kCPU, 4);
  EXPECT_GT(one.bytes, std::int64_t{1} << 28);
  EXPECT_EQ(four.bytes, one.bytes / 4);
  expect_contains(four.description, {"shared by its 4 local ranks"});
}

}  // namespace
}  // namespace megatron::train
