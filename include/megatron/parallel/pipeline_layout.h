// Which transformer layers each pipeline stage and model chunk holds, by Megatron's rules
// (get_transformer_layer_offset / get_num_layers_to_build): an even split of the layers over
// stages x chunks, or, with --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers,
// the first and last stages given their counts and the remaining layers split evenly over the
// other stages; with virtual stages every stage's layers are split evenly over its chunks and
// chunk c of all stages comes before chunk c + 1 in the layer order. Pure functions of the sizes.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace megatron::parallel {

struct PipelineLayout {
  int num_layers = 1;
  int stages = 1;  // P
  int chunks = 1;  // V, virtual stages per pipeline rank
  std::optional<int> first_stage_layers;
  std::optional<int> last_stage_layers;

  // Every problem with these sizes, one message each (flag names as the user wrote them).
  std::vector<std::string> validate() const;
  // The layers of chunk `chunk` on stage `stage`: global index of the first one and their count.
  struct Range {
    int first = 0;
    int count = 0;
  };
  Range layers(int stage, int chunk) const;
  // Chunks per pipeline rank from Megatron's two spellings of virtual stages: their count
  // (--num-virtual-stages-per-pipeline-rank), else layers per virtual stage
  // (--num-layers-per-virtual-pipeline-stage: num_layers / pp / it), else one.
  static int virtual_chunks(int num_layers, int pp, std::optional<int> virtual_stages,
                            std::optional<int> layers_per_virtual_stage);
};

}  // namespace megatron::parallel
