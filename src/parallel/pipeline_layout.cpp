// PipelineLayout (see pipeline_layout.h): Megatron's layer offsets for even, uneven and
// interleaved pipelines.
#include "megatron/parallel/pipeline_layout.h"

#include <algorithm>

#include "megatron/core/check.h"

namespace megatron::parallel {
namespace {

struct Split {
  int first = 0;       // layers of the first stage
  int last = 0;        // layers of the last stage
  int middle = 0;      // layers of every other stage
  int middle_stages = 0;
};

// Layers per stage. Uneven counts apply only to the stages they name; with P = 1 there is one stage.
Split split(const PipelineLayout& l) {
  Split s;
  const int given = (l.first_stage_layers ? 1 : 0) + (l.last_stage_layers ? 1 : 0);
  s.middle_stages = l.stages - given;
  const int rest = l.num_layers - l.first_stage_layers.value_or(0) - l.last_stage_layers.value_or(0);
  s.middle = s.middle_stages > 0 ? rest / s.middle_stages : 0;
  s.first = l.first_stage_layers.value_or(s.middle);
  s.last = l.last_stage_layers.value_or(s.middle);
  return s;
}

}  // namespace

std::vector<std::string> PipelineLayout::validate() const {
  std::vector<std::string> problems;
  if (stages < 1 || chunks < 1 || num_layers < 1) {
    problems.push_back(str_cat("a pipeline needs at least one stage, chunk and layer (got ", stages, ", ", chunks, ", ",
                               num_layers, ")"));
    return problems;
  }
  const bool uneven = first_stage_layers || last_stage_layers;
  if (uneven && stages < 2) {
    problems.push_back("--decoder-first-pipeline-num-layers and --decoder-last-pipeline-num-layers need "
                       "--pipeline-model-parallel-size of at least 2");
    return problems;
  }
  for (const auto& [value, flag] : {std::pair{first_stage_layers, "--decoder-first-pipeline-num-layers"},
                                    std::pair{last_stage_layers, "--decoder-last-pipeline-num-layers"}}) {
    if (value && (*value < 1 || *value % chunks != 0)) {
      problems.push_back(str_cat(flag, " (", *value, ") must be positive and divisible by the virtual stages per "
                                 "pipeline rank (", chunks, ")"));
    }
  }
  if (!problems.empty()) return problems;
  const Split s = split(*this);
  const int rest = num_layers - first_stage_layers.value_or(0) - last_stage_layers.value_or(0);
  if (!uneven) {
    if (num_layers % (stages * chunks) != 0) {
      problems.push_back(str_cat("--num-layers (", num_layers, ") should be divisible by the pipeline-model-parallel size (",
                                 stages, ")", chunks > 1 ? str_cat(" x virtual stages per pipeline rank (", chunks, ")") : ""));
    }
  } else if (rest < 0 || (s.middle_stages == 0 && rest != 0) ||
             (s.middle_stages > 0 && (rest % s.middle_stages != 0 || s.middle % chunks != 0))) {
    problems.push_back(str_cat("--num-layers (", num_layers, ") minus the first and last stages' layers (", rest,
                               ") must split evenly over the other ", s.middle_stages, " pipeline stages",
                               chunks > 1 ? str_cat(" and their ", chunks, " virtual stages") : ""));
  }
  return problems;
}

PipelineLayout::Range PipelineLayout::layers(int stage, int chunk) const {
  MEGATRON_ASSERT(stage >= 0 && stage < stages && chunk >= 0 && chunk < chunks, "stage ", stage, " chunk ", chunk);
  const Split s = split(*this);
  // Per chunk: every stage's layers are split evenly over its chunks; chunk c of every stage
  // precedes chunk c + 1 (a "virtual round" holds one chunk of each stage).
  const int first_chunk = s.first / chunks, middle_chunk = s.middle / chunks, last_chunk = s.last / chunks;
  const int round = first_chunk + middle_chunk * (stages - 2 < 0 ? 0 : stages - 2) + (stages > 1 ? last_chunk : 0);
  Range r;
  const int count = stage == 0 ? first_chunk : (stage == stages - 1 ? last_chunk : middle_chunk);
  int offset = chunk * round;
  if (stage > 0) offset += first_chunk + (stage - 1) * middle_chunk;
  r.first = offset;
  r.count = count;
  return r;
}

int PipelineLayout::virtual_chunks(int num_layers, int pp, std::optional<int> virtual_stages,
                                   std::optional<int> layers_per_virtual_stage) {
  if (virtual_stages && *virtual_stages > 0) return *virtual_stages;
  if (layers_per_virtual_stage && *layers_per_virtual_stage > 0) return num_layers / std::max(1, pp) / *layers_per_virtual_stage;
  return 1;
}

}  // namespace megatron::parallel
