// Writing a single-process model as a checkpoint of another layout (see model_checkpoint.h).
#include "megatron/interop/model_checkpoint.h"

#include "megatron/checkpoint/reshard.h"
#include "megatron/checkpoint/shard_name.h"
#include "megatron/checkpoint/torch_dist.h"

namespace megatron::interop {

void write_model_checkpoint(const std::string& save_dir, const model::GptModel& model,
                            const checkpoint::CheckpointState& common, const CheckpointTarget& target) {
  const model::ModelConfig& config = model.config();
  const auto& params = model.named_parameters();
  const auto& layouts = model.parameter_layouts();
  const int tp = target.tp, pp = target.pp, ep = target.ep;
  if (target.format == checkpoint::CheckpointFormat::kTorchDist) {
    checkpoint::SavedLayout layout;
    layout.format = target.format;
    layout.tp = layout.etp = tp;
    layout.pp = pp;
    layout.ep = ep;
    checkpoint::save_torch_dist_model(save_dir, common, params, layouts, config, layout);
    return;
  }
  // Each TP x PP (x EP) rank's shard under the names its stage gives it: the dense parameters' TP
  // shards in every EP rank's folder, the experts' only in their own.
  const bool tied = !config.untie_embeddings_and_output_weights;
  const parallel::PipelineLayout split{config.num_layers, pp, 1, std::nullopt, std::nullopt};
  std::vector<std::pair<std::string, checkpoint::NamedTensors>> shards;
  std::vector<checkpoint::StagePlace> places;
  for (const auto& [name, param] : params) places.push_back(checkpoint::stage_place(name, split));
  for (int p = 0; p < pp; ++p) {
    for (int e = 0; e < ep; ++e) {
      for (int r = 0; r < tp; ++r) {
        checkpoint::NamedTensors mine;
        for (std::size_t i = 0; i < params.size(); ++i) {
          const std::string& name = params[i].first;
          const auto shard = [&] {
            return parallel::shard_of_full(parallel::expert_block(params[i].second.detach(), layouts[i], e, ep),
                                           layouts[i], r, tp);
          };
          if (places[i].stage == p) mine.emplace_back(places[i].name, shard());
          // Tied embeddings over several stages: the last one keeps its own copy as the output layer.
          if (tied && pp > 1 && p == pp - 1 && name == "embedding.word_embeddings.weight") {
            mine.emplace_back("output_layer.weight", shard());
          }
        }
        shards.emplace_back(checkpoint::ShardName{r, p, pp, e, ep}.str(), std::move(mine));
      }
    }
  }
  checkpoint::save_model_shards(save_dir, common, shards, ep);
}

}  // namespace megatron::interop
