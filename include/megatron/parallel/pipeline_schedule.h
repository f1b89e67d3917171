// Megatron's pipeline schedules (spec 9) as plain event lists: what one stage does in one
// iteration, in order — forward and backward steps of (micro-batch, model chunk) and the transfers
// between stages. No pipelining (PP 1), non-interleaved 1F1B, and the interleaved schedule with
// virtual stages and micro-batch groups, each built from named phases (warm-up, steady 1F1B,
// cool-down). The lists are pure functions of the sizes, so they are tested against the spec's
// tables; PipelineExecutor (pipeline_executor.h) runs them. Transfers keep Megatron's issue order:
// within one exchange the sends come before the receives. A transfer names the micro-batch and
// chunk whose activation (or gradient) moves, from the point of view of the step that produced it
// (sends) or will consume it (receives).
#pragma once

#include <string>
#include <vector>

namespace megatron::parallel {

enum class PipelineOp {
  kForward,       // forward step of (microbatch, chunk)
  kBackward,      // backward step of (microbatch, chunk)
  kRecvForward,   // the input activation of forward (microbatch, chunk), from the previous stage
  kSendForward,   // the output activation of forward (microbatch, chunk), to the next stage
  kRecvBackward,  // the output gradient of backward (microbatch, chunk), from the next stage
  kSendBackward,  // the input gradient of backward (microbatch, chunk), to the previous stage
};

struct PipelineEvent {
  PipelineOp op;
  int microbatch = 0;
  int chunk = 0;
  bool operator==(const PipelineEvent&) const = default;
};

// "F3.1" (forward of micro-batch 3, chunk 1), "B3.1", "RF3.1", "SF3.1", "RB3.1", "SB3.1"; chunks
// are left out when the schedule has one chunk ("F3", "SB0").
std::string to_string(const PipelineEvent& e, bool with_chunk);
std::string to_string(const std::vector<PipelineEvent>& events, bool with_chunk);

struct PipelineShape {
  int stages = 1;         // P, the pipeline-parallel size
  int chunks = 1;         // V, model chunks (virtual stages) per stage
  int microbatches = 1;   // M, per iteration and DP rank
  int group_size = 0;     // G, --microbatch-group-size-per-virtual-pipeline-stage; 0: P
  // Every problem with these sizes (Megatron's checks), for the flag report.
  std::vector<std::string> validate() const;
};

// The forward order of (microbatch, chunk) for the interleaved schedule, the same on every stage
// (spec 9.2.3); one chunk: micro-batches in order.
struct ChunkStep {
  int microbatch;
  int chunk;
};
std::vector<ChunkStep> interleaved_forward_order(const PipelineShape& shape);

// One iteration of stage `stage` (0-based): the warm-up, steady and cool-down phases of the
// schedule the shape selects (no pipelining when P is 1, 1F1B when V is 1, interleaved otherwise).
// Throws megatron::Error listing the shape's problems.
std::vector<PipelineEvent> pipeline_schedule(const PipelineShape& shape, int stage);

// Evaluation (forward only): the forward steps in the interleaved order (micro-batch order with
// one chunk), each receiving its input and sending its output.
std::vector<PipelineEvent> forward_only_schedule(const PipelineShape& shape, int stage);

// The number of forward steps each phase of `stage` runs: {warm-up, steady, cool-down}.
struct PipelinePhases {
  int warmup = 0;
  int steady = 0;
  int cooldown = 0;
};
PipelinePhases pipeline_phases(const PipelineShape& shape, int stage);

}  // namespace megatron::parallel
