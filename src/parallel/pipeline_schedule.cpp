// The schedules of pipeline_schedule.h, phase by phase as spec 9 (Megatron's schedules.py)
// describes them. Transfers of one exchange are listed in Megatron's batched issue order: send to
// the previous stage, receive from it, send to the next, receive from it.
#include "megatron/parallel/pipeline_schedule.h"

#include <algorithm>

#include "megatron/core/check.h"

namespace megatron::parallel {
namespace {

int effective_group_size(const PipelineShape& s) { return s.group_size > 0 ? s.group_size : s.stages; }

// Appends the events of one stage; knows which (microbatch, chunk) steps sit on the first or last
// virtual stage, whose inputs come from the data and whose outputs go to the loss.
class Builder {
 public:
  Builder(const PipelineShape& shape, int stage) : shape_(shape), stage_(stage) {}

  void forward(ChunkStep s) { add(PipelineOp::kForward, s); }
  void backward(ChunkStep s) { add(PipelineOp::kBackward, s); }
  // One exchange; steps not given (nullptr) or that need no transfer are left out.
  void exchange(const ChunkStep* send_backward, const ChunkStep* recv_forward, const ChunkStep* send_forward,
                const ChunkStep* recv_backward) {
    if (send_backward && !first_virtual(*send_backward)) add(PipelineOp::kSendBackward, *send_backward);
    if (recv_forward && !first_virtual(*recv_forward)) add(PipelineOp::kRecvForward, *recv_forward);
    if (send_forward && !last_virtual(*send_forward)) add(PipelineOp::kSendForward, *send_forward);
    if (recv_backward && !last_virtual(*recv_backward)) add(PipelineOp::kRecvBackward, *recv_backward);
  }
  std::vector<PipelineEvent> take() { return std::move(events_); }

 private:
  bool first_virtual(ChunkStep s) const { return stage_ == 0 && s.chunk == 0; }
  bool last_virtual(ChunkStep s) const { return stage_ == shape_.stages - 1 && s.chunk == shape_.chunks - 1; }
  void add(PipelineOp op, ChunkStep s) { events_.push_back({op, s.microbatch, s.chunk}); }

  PipelineShape shape_;
  int stage_;
  std::vector<PipelineEvent> events_;
};

// Non-interleaved 1F1B (spec 9.1); with one stage, forward and backward of each micro-batch.
std::vector<PipelineEvent> one_f_one_b(const PipelineShape& shape, int stage) {
  const PipelinePhases phases = pipeline_phases(shape, stage);
  Builder b(shape, stage);
  auto step = [](int m) { return ChunkStep{m, 0}; };
  int fwd = 0, bwd = 0;
  // Warm-up: forward only.
  for (int i = 0; i < phases.warmup; ++i, ++fwd) {
    const ChunkStep f = step(fwd);
    b.exchange(nullptr, &f, nullptr, nullptr);
    b.forward(f);
    b.exchange(nullptr, nullptr, &f, nullptr);
  }
  // Steady 1F1B: the oldest micro-batch in flight goes backward after each forward.
  if (phases.steady > 0) {
    const ChunkStep f = step(fwd);
    b.exchange(nullptr, &f, nullptr, nullptr);
  }
  for (int i = 0; i < phases.steady; ++i, ++fwd, ++bwd) {
    const ChunkStep f = step(fwd), g = step(bwd), next = step(fwd + 1);
    b.forward(f);
    b.exchange(nullptr, nullptr, &f, &g);
    b.backward(g);
    b.exchange(&g, i + 1 < phases.steady ? &next : nullptr, nullptr, nullptr);
  }
  // Cool-down: the backward steps of the warm-up's micro-batches.
  for (int i = 0; i < phases.cooldown; ++i, ++bwd) {
    const ChunkStep g = step(bwd);
    b.exchange(nullptr, nullptr, nullptr, &g);
    b.backward(g);
    b.exchange(&g, nullptr, nullptr, nullptr);
  }
  return b.take();
}

// Interleaved (spec 9.2): virtual forward step k runs table[k]; backward step k runs table[k]'s
// micro-batch on the mirrored chunk.
std::vector<PipelineEvent> interleaved(const PipelineShape& shape, int stage) {
  const std::vector<ChunkStep> table = interleaved_forward_order(shape);
  const int total = static_cast<int>(table.size());
  const PipelinePhases phases = pipeline_phases(shape, stage);
  auto fwd = [&](int k) { return table[static_cast<std::size_t>(k)]; };
  auto bwd = [&](int k) {
    return ChunkStep{table[static_cast<std::size_t>(k)].microbatch, shape.chunks - 1 - table[static_cast<std::size_t>(k)].chunk};
  };
  Builder b(shape, stage);
  const ChunkStep first = fwd(0);
  b.exchange(nullptr, &first, nullptr, nullptr);
  // Warm-up: forward steps; the last one also receives the first backward's gradient.
  for (int k = 0; k < phases.warmup; ++k) {
    const ChunkStep f = fwd(k);
    b.forward(f);
    const ChunkStep next = k + 1 < total ? fwd(k + 1) : ChunkStep{};
    const ChunkStep g0 = bwd(0);
    const bool last_warmup = k == phases.warmup - 1 && phases.steady > 0;
    b.exchange(nullptr, k + 1 < total ? &next : nullptr, &f, last_warmup ? &g0 : nullptr);
  }
  // Steady: forward step warmup + k, then backward step k, then one four-way exchange.
  for (int k = 0; k < phases.steady; ++k) {
    const int fk = phases.warmup + k;
    const ChunkStep f = fwd(fk), g = bwd(k);
    b.forward(f);
    b.backward(g);
    const ChunkStep next_f = fk + 1 < total ? fwd(fk + 1) : ChunkStep{};
    const ChunkStep next_g = k + 1 < total ? bwd(k + 1) : ChunkStep{};
    b.exchange(&g, k + 1 < phases.steady ? &next_f : nullptr, &f, k + 1 < total ? &next_g : nullptr);
  }
  // Cool-down: the remaining backward steps (after an all-warm-up iteration, first the gradient
  // of backward step 0).
  if (phases.steady == 0 && phases.cooldown > 0) {
    const ChunkStep g0 = bwd(0);
    b.exchange(nullptr, nullptr, nullptr, &g0);
  }
  for (int k = phases.steady; k < total; ++k) {
    const ChunkStep g = bwd(k);
    b.backward(g);
    const ChunkStep next = k + 1 < total ? bwd(k + 1) : ChunkStep{};
    b.exchange(&g, nullptr, nullptr, k + 1 < total ? &next : nullptr);
  }
  return b.take();
}

}  // namespace

std::string to_string(const PipelineEvent& e, bool with_chunk) {
  static const char* const kNames[] = {"F", "B", "RF", "SF", "RB", "SB"};
  const char* name = kNames[static_cast<int>(e.op)];
  return with_chunk ? str_cat(name, e.microbatch, ".", e.chunk) : str_cat(name, e.microbatch);
}

std::string to_string(const std::vector<PipelineEvent>& events, bool with_chunk) {
  std::string out;
  for (const auto& e : events) {
    if (!out.empty()) out += ' ';
    out += to_string(e, with_chunk);
  }
  return out;
}

std::vector<std::string> PipelineShape::validate() const {
  std::vector<std::string> problems;
  if (stages < 1 || chunks < 1 || microbatches < 1) {
    problems.push_back(str_cat("a pipeline needs at least one stage, chunk and micro-batch (got ", stages, ", ",
                               chunks, ", ", microbatches, ")"));
    return problems;
  }
  if (chunks > 1) {
    const int g = effective_group_size(*this);
    if (stages < 2) problems.push_back("virtual pipeline stages need --pipeline-model-parallel-size of at least 2");
    if (g < stages || g > microbatches) {
      problems.push_back(str_cat("the interleaved schedule needs --pipeline-model-parallel-size (", stages,
                                 ") <= --microbatch-group-size-per-virtual-pipeline-stage (", g,
                                 ") <= the number of micro-batches per data-parallel rank (", microbatches, ")"));
    } else if (microbatches % g != 0 && microbatches % g < stages) {
      problems.push_back(str_cat("the interleaved schedule needs the number of micro-batches (", microbatches,
                                 ") modulo the micro-batch group size (", g,
                                 ") to be 0 or at least --pipeline-model-parallel-size (", stages, ")"));
    }
  }
  return problems;
}

std::vector<ChunkStep> interleaved_forward_order(const PipelineShape& shape) {
  std::vector<ChunkStep> table;
  const int g = shape.chunks > 1 ? effective_group_size(shape) : shape.microbatches;
  for (int start = 0; start < shape.microbatches; start += g) {
    const int end = std::min(start + g, shape.microbatches);
    for (int c = 0; c < shape.chunks; ++c) {
      for (int m = start; m < end; ++m) table.push_back({m, c});
    }
  }
  return table;
}

std::vector<PipelineEvent> forward_only_schedule(const PipelineShape& shape, int stage) {
  // The interleaved forward order, so that a stage works on the next micro-batches of a chunk
  // while earlier ones travel round the pipeline (in micro-batch order for one chunk).
  Builder b(shape, stage);
  for (const ChunkStep& f : interleaved_forward_order(shape)) {
    b.exchange(nullptr, &f, nullptr, nullptr);
    b.forward(f);
    b.exchange(nullptr, nullptr, &f, nullptr);
  }
  return b.take();
}

PipelinePhases pipeline_phases(const PipelineShape& shape, int stage) {
  const int total = shape.microbatches * shape.chunks;
  PipelinePhases p;
  if (shape.chunks == 1) {
    p.warmup = std::min(shape.stages - stage - 1, shape.microbatches);
  } else {
    p.warmup = std::min((shape.stages - stage - 1) * 2 + (shape.chunks - 1) * effective_group_size(shape), total);
  }
  p.steady = total - p.warmup;
  p.cooldown = p.warmup;
  return p;
}

std::vector<PipelineEvent> pipeline_schedule(const PipelineShape& shape, int stage) {
  const auto problems = shape.validate();
  throw_if_problems("invalid pipeline schedule", problems, ProblemHeading::kList);
  MEGATRON_CHECK(stage >= 0 && stage < shape.stages, "internal error: stage ", stage, " of ", shape.stages);
  return shape.chunks == 1 ? one_f_one_b(shape, stage) : interleaved(shape, stage);
}

}  // namespace megatron::parallel
