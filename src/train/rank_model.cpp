// This rank's model and what it needs in memory (see trainer_parts.h). Each parameter is drawn
// as this rank's shard of the stream of its name and the seed (parallel/parameter_init.h), on the
// device: any layout starts from the same weights, and a rank draws only what it holds.
#include <ostream>
#include <string>

#include "megatron/checkpoint/shard_name.h"
#include "megatron/model/transformer_layer.h"
#include "megatron/parallel/parameter_init.h"
#include "megatron/train/theoretical_memory.h"
#include "trainer_parts.h"

namespace megatron::train {

RankModel build_rank_model(const RunPlan& plan, const parallel::PipelineLayout& layout,
                           const parallel::ParallelState& ps, const parallel::ParallelContext& pc, at::Device device,
                           std::ostream& any) {
  const model::ModelConfig& config = plan.model;
  RankModel m;
  const int chunks = layout.chunks;
  const at::TensorOptions options = at::TensorOptions().device(device).dtype(plan.precision.params);
  const parallel::ParameterInit init(plan.loop.seed);
  for (int c = 0; c < chunks; ++c) {
    const auto range = layout.layers(ps.pp_rank(), c);
    const model::StageSpec stage{range.first, range.count, ps.is_first_stage() && c == 0,
                                 ps.is_last_stage() && c == chunks - 1};
    m.chunks.push_back(std::make_unique<model::GptModel>(config, pc, init, stage, options));
    const std::string prefix = checkpoint::chunk_prefix(c, chunks);
    const model::GptModel& chunk = *m.chunks.back();
    for (const auto& [name, t] : chunk.named_parameters()) m.params.emplace_back(prefix + name, t);
    const auto& l = chunk.parameter_layouts();
    m.layouts.insert(m.layouts.end(), l.begin(), l.end());
    for (const auto& [name, t] : chunk.checkpoint_tensors()) m.saved.emplace_back(prefix + name, t);
    const auto saved_layouts = chunk.checkpoint_layouts();
    m.saved_layouts.insert(m.saved_layouts.end(), saved_layouts.begin(), saved_layouts.end());
  }
  m.reads_data = ps.is_first_stage() || ps.is_last_stage() || plan.data.dataset.reset_attention_mask;
  std::int64_t count = 0;
  for (const auto& [name, t] : m.params) count += t.numel();
  if (ps.dp_rank() == 0 && ps.cp_rank() == 0) {
    any << " > number of parameters on (tensor, pipeline) model parallel rank (" << ps.tp_rank() << ", "
        << ps.pp_rank() << "): " << count << std::endl;
  }
  m.ddp = std::make_unique<parallel::DataParallelBuffers>(m.params, m.layouts, pc, plan.ddp);
  // The activations between stages: this rank's part of the sequence (CP), split again over TP
  // under sequence parallelism.
  const std::int64_t seq = config.seq_length / ps.cp() / (config.sequence_parallel && ps.tp() > 1 ? ps.tp() : 1);
  m.executor = std::make_unique<parallel::PipelineExecutor>(
      pc, parallel::PipelineShape{ps.pp(), chunks, plan.loop.num_microbatches, plan.pipeline.microbatch_group_size},
      std::vector<std::int64_t>{seq, plan.loop.micro_batch_size, config.hidden_size}, options);
  return m;
}

RankShare rank_share(const parallel::ParallelState& ps, const parallel::PipelineLayout& layout) {
  // dp: the ranks the distributed optimizer shards over, DP x CP.
  RankShare share{ps.rank(), ps.tp(),  ps.tp_rank(),   ps.pp(),       ps.pp_rank(), ps.dp() * ps.cp(),
                  {},        ps.ep(), ps.expert_dp(), ps.expert_tp()};
  for (int c = 0; c < layout.chunks; ++c) share.chunk_layers.push_back(layout.layers(ps.pp_rank(), c).count);
  return share;
}

MemorySettings memory_settings(const RunPlan& plan, at::Device device) {
  MemorySettings m;
  m.param_bytes = static_cast<int>(c10::elementSize(plan.precision.params));
  m.grad_in_fp32 = plan.precision.grad_in_fp32;
  m.distributed_optimizer = plan.ddp.use_distributed_optimizer;
  m.micro_batch_size = plan.loop.micro_batch_size;
  m.explicit_attention = plan.data.dataset.reset_attention_mask || !model::uses_sdpa(plan.model.attention_backend, device);
  return m;
}

std::vector<std::string> theoretical_memory_lines(const RunPlan& plan, const parallel::ParallelState& ps,
                                                  const parallel::PipelineLayout& layout) {
  TheoreticalMemoryInputs in;
  in.model = plan.model;
  in.tp = ps.tp();
  in.pp = ps.pp();
  in.dp = ps.dp();
  in.virtual_stages = layout.chunks > 1 ? layout.chunks : 0;
  in.distributed_optimizer = plan.ddp.use_distributed_optimizer;
  in.micro_batch_size = plan.loop.micro_batch_size;
  in.num_microbatches = plan.loop.num_microbatches;
  return theoretical_memory(in).lines;
}

}  // namespace megatron::train
