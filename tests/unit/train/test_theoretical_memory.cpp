// Megatron's theoretical memory report against Megatron's own: the expected lines are what
// core_v0.12.0's megatron/training/theoretical_memory_usage.py (report_theoretical_memory,
// verbose) printed for the same arguments, run with Python 3.11 on 2026-11-26. The cases cover the
// weight-only report, the activation formula with 1F1B, the interleaved penalty, one stage with
// the output layer, fewer micro-batches than stages, GQA, SwiGLU, untied embeddings and the
// distributed optimizer.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "megatron/train/theoretical_memory.h"

namespace megatron::train {
namespace {

model::ModelConfig gpt(int layers, int hidden, int heads, int kv_channels, int ffn, std::int64_t vocab, int seq) {
  model::ModelConfig m;
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.num_attention_heads = heads;
  m.num_query_groups = heads;
  m.kv_channels = kv_channels;
  m.ffn_hidden_size = ffn;
  m.padded_vocab_size = vocab;
  m.seq_length = seq;
  m.max_position_embeddings = seq;
  return m;
}

void sequence_parallel_selective(model::ModelConfig& m) {
  m.sequence_parallel = true;
  m.recompute_granularity = model::RecomputeGranularity::kSelective;
}

TEST(TheoreticalMemory, WeightsOnlyWithoutSequenceParallelism) {
  TheoreticalMemoryInputs in;
  in.model = gpt(12, 768, 12, 64, 3072, 50304, 1024);
  in.micro_batch_size = 16;
  in.num_microbatches = 4;
  const TheoreticalMemory t = theoretical_memory(in);
  EXPECT_EQ(t.lines, (std::vector<std::string>{
       "Number of parameters in transformer block in billions:  0.08",
       "Number of parameters in embedding layers in billions: 0.04",
       "Total number of parameters in billions: 0.12",
       "Number of parameters in most loaded shard in billions: 0.1236",
       "Theoretical memory footprints: weight and optimizer=2121.85 MB"}));
  EXPECT_NEAR(t.weight_and_optimizer_mb, 2121.85, 0.005);
  EXPECT_FALSE(t.activation_mb.has_value());
}

TEST(TheoreticalMemory, OneFOneBWithTheDistributedOptimizer) {
  TheoreticalMemoryInputs in;
  in.model = gpt(24, 1024, 16, 64, 4096, 50304, 2048);
  in.model.untie_embeddings_and_output_weights = true;
  sequence_parallel_selective(in.model);
  in.tp = 2;
  in.pp = 2;
  in.dp = 2;
  in.distributed_optimizer = true;
  in.micro_batch_size = 2;
  in.num_microbatches = 8;
  const TheoreticalMemory t = theoretical_memory(in);
  EXPECT_EQ(t.lines, (std::vector<std::string>{
       "Number of parameters in transformer block in billions:  0.30",
       "Number of parameters in embedding layers in billions: 0.10",
       "Total number of parameters in billions: 0.41",
       "Number of parameters in most loaded shard in billions: 0.1013",
       "Number of parameters in other shards in billions: 0.0755",
       "Activation memory footprint per transformer layer: 68.0 MB",
       "Number of in-flight microbatches: 2",
       "Theoretical memory footprints: weight and optimizer=1159.04 MB, activation=1636.03 MB, total=2795.07 MB",
       ""}));
  ASSERT_TRUE(t.activation_mb.has_value());
  EXPECT_NEAR(*t.activation_mb, 1636.03, 0.005);
}

TEST(TheoreticalMemory, InterleavedScheduleWithGqaAndSwiglu) {
  TheoreticalMemoryInputs in;
  in.model = gpt(32, 4096, 32, 128, 14336, 128256, 4096);
  in.model.num_query_groups = 8;
  in.model.swiglu = true;
  in.model.untie_embeddings_and_output_weights = true;
  sequence_parallel_selective(in.model);
  in.tp = 4;
  in.pp = 4;
  in.virtual_stages = 2;
  in.dp = 4;
  in.distributed_optimizer = true;
  in.micro_batch_size = 1;
  in.num_microbatches = 16;
  EXPECT_EQ(theoretical_memory(in).lines, (std::vector<std::string>{
       "Number of parameters in transformer block in billions:  6.98",
       "Number of parameters in embedding layers in billions: 1.05",
       "Total number of parameters in billions: 8.03",
       "Number of parameters in most loaded shard in billions: 0.5676",
       "Number of parameters in other shards in billions: 0.4362",
       "Activation memory footprint per transformer layer: 128.0 MB",
       "Memory penalty from interleaved schedule: 1.38",
       "Number of in-flight microbatches: 6",
       "Theoretical memory footprints: weight and optimizer=4871.54 MB, activation=5654.04 MB, total=10525.58 MB",
       ""}));
}

// MoE layers count every expert (and the shared expert) as Megatron's formula does; the expected
// lines are core_v0.12.0's output for the same arguments (moe_layer_freq as a list and as an
// integer), run 2026-11-28.
TEST(TheoreticalMemory, MixtureOfExpertsLayersCountTheirExperts) {
  TheoreticalMemoryInputs in;
  in.model = gpt(4, 1024, 16, 64, 2816, 32000, 1024);
  in.model.num_query_groups = 4;
  in.model.swiglu = true;
  in.model.untie_embeddings_and_output_weights = true;
  in.model.moe.num_experts = 8;
  in.model.moe.ffn_hidden_size = 1024;
  in.model.moe.layer_pattern = {0, 1, 1, 1};
  in.tp = 2;
  in.dp = 4;
  in.distributed_optimizer = true;
  in.micro_batch_size = 1;
  in.num_microbatches = 1;
  EXPECT_EQ(theoretical_memory(in).lines, (std::vector<std::string>{
       "Number of parameters in transformer block in billions:  0.09",
       "Number of parameters in embedding layers in billions: 0.07",
       "Total number of parameters in billions: 0.16",
       "Number of parameters in most loaded shard in billions: 0.0801",
       "Theoretical memory footprints: weight and optimizer=687.45 MB"}));
  in.model.moe.layer_pattern.clear();
  in.model.moe.layer_freq = 2;
  in.model.moe.shared_expert_intermediate_size = 512;
  in.pp = 2;
  in.distributed_optimizer = false;
  EXPECT_EQ(theoretical_memory(in).lines, (std::vector<std::string>{
       "Number of parameters in transformer block in billions:  0.08",
       "Number of parameters in embedding layers in billions: 0.07",
       "Total number of parameters in billions: 0.15",
       "Number of parameters in most loaded shard in billions: 0.0367",
       "Number of parameters in other shards in billions: 0.0203",
       "Theoretical memory footprints: weight and optimizer=630.08 MB"}));
}

TEST(TheoreticalMemory, OneStageCountsTheOutputLayer) {
  TheoreticalMemoryInputs in;
  in.model = gpt(24, 2048, 16, 128, 8192, 50304, 2048);
  sequence_parallel_selective(in.model);
  in.tp = 8;
  in.micro_batch_size = 4;
  EXPECT_EQ(theoretical_memory(in).lines, (std::vector<std::string>{
       "Number of parameters in transformer block in billions:  1.21",
       "Number of parameters in embedding layers in billions: 0.10",
       "Total number of parameters in billions: 1.31",
       "Number of parameters in most loaded shard in billions: 0.1639",
       "Activation memory footprint per transformer layer: 68.0 MB",
       "Theoretical memory footprints: weight and optimizer=2813.49 MB, activation=1838.51 MB, total=4652.00 MB",
       ""}));
}

TEST(TheoreticalMemory, FewerMicroBatchesThanStages) {
  TheoreticalMemoryInputs in;
  in.model = gpt(16, 1024, 16, 64, 4096, 50304, 1024);
  sequence_parallel_selective(in.model);
  in.tp = 2;
  in.pp = 4;
  in.micro_batch_size = 2;
  in.num_microbatches = 2;
  EXPECT_EQ(theoretical_memory(in).lines, (std::vector<std::string>{
       "Number of parameters in transformer block in billions:  0.20",
       "Number of parameters in embedding layers in billions: 0.05",
       "Total number of parameters in billions: 0.25",
       "Number of parameters in most loaded shard in billions: 0.0509",
       "Number of parameters in other shards in billions: 0.0252",
       "Activation memory footprint per transformer layer: 34.0 MB",
       "Number of in-flight microbatches: 2",
       "Theoretical memory footprints: weight and optimizer=874.27 MB, activation=274.02 MB, total=1148.29 MB",
       ""}));
}

}  // namespace
}  // namespace megatron::train
