// PipelineExecutor (see pipeline_executor.h). Per (microbatch, chunk) it keeps the step's input
// and output until the backward step, the received output gradient until then, and the input
// gradient until it is sent. An output sent to the next stage keeps only its autograd node: its
// data is released once the send has its own reference (Megatron's deallocate_output_tensor), and
// its backward starts from the node with the received gradient (Megatron's custom_backward), so
// a stage holds its saved inputs for the micro-batches in flight, not their outputs too.
// Tags: 2 * (microbatch * V + chunk) + direction, with the chunk the sender names (the first
// stage's chunk c + 1 receives the last stage's chunk c), modulo 32768.
#include "megatron/parallel/pipeline_executor.h"

#include <ATen/ops/empty.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/variable.h>

#include <chrono>
#include <map>
#include <utility>

#include "megatron/core/check.h"

namespace megatron::parallel {
namespace {

using Key = std::pair<int, int>;  // (microbatch, chunk)

bool is_transfer(PipelineOp op) { return op != PipelineOp::kForward && op != PipelineOp::kBackward; }

at::Tensor take(std::map<Key, at::Tensor>& from, const Key& key, const char* what) {
  const auto it = from.find(key);
  MEGATRON_ASSERT(it != from.end(), "pipeline executor: no ", what, " for micro-batch ", key.first, " chunk ",
                  key.second);
  at::Tensor t = std::move(it->second);
  from.erase(it);
  return t;
}

// Replaces the data of a sent output by one element, keeping its autograd node. Only for a tensor
// that owns its storage alone (not a view, whose base would keep the memory anyway).
void release_data(at::Tensor& output) {
  if (output.is_view() || !output.requires_grad()) return;
  output.set_data(at::empty({1}, output.options()));
}

// Backward from `output`'s node with `grad` of the original shape: the engine checks the gradient
// against the node's recorded input shape, not against the (released) tensor.
void backward_from_node(const at::Tensor& output, const at::Tensor& grad) {
  auto& engine = torch::autograd::Engine::get_default_engine();
  engine.execute({torch::autograd::impl::gradient_edge(output)}, {grad}, /*keep_graph=*/false,
                 /*create_graph=*/false, /*accumulate_grad=*/true);
}

// One run of a schedule on this rank: the tensors kept per (microbatch, chunk) between its steps,
// and the time spent in the steps.
class ScheduleRun {
 public:
  ScheduleRun(const ParallelContext& pc, const PipelineShape& shape, const std::vector<std::int64_t>& activation_shape,
              at::TensorOptions options, const PipelineSteps& steps, bool training)
      : pc_(pc),
        group_(*pc.pp),
        stage_(group_.rank()),
        stages_(group_.size()),
        chunks_(shape.chunks),
        activation_shape_(activation_shape),
        options_(options),
        steps_(steps),
        training_(training) {}

  // The forward step of (microbatch, chunk): its received input in, its output kept for the send
  // (and, training, with the input for the backward step).
  void forward(const PipelineEvent& e) {
    const Key key{e.microbatch, e.chunk};
    at::Tensor input;
    if (!first_virtual(e.chunk)) input = take(inputs_, key, "received input");
    const auto step_start = Clock::now();
    at::Tensor output = steps_.forward(e.microbatch, e.chunk, input);
    busy_ += Clock::now() - step_start;
    MEGATRON_ASSERT(output.defined(), "pipeline forward step returned nothing");
    if (training_) {
      if (input.defined()) inputs_[key] = input;  // kept for the input gradient
      outputs_[key] = output;
    } else if (!last_virtual(e.chunk)) {
      outputs_[key] = output;
    }
  }

  // The backward step: from the loss, or from the output's node with the received gradient; the
  // input's gradient kept for the send.
  void backward(const PipelineEvent& e) {
    const Key key{e.microbatch, e.chunk};
    if (steps_.before_backward) steps_.before_backward(e.microbatch, e.chunk);
    const at::Tensor output = take(outputs_, key, "forward output");
    const at::Tensor output_grad = last_virtual(e.chunk) ? at::Tensor() : take(output_grads_, key, "received output gradient");
    const auto step_start = Clock::now();
    if (output_grad.defined()) {
      backward_from_node(output, output_grad);
    } else {
      torch::autograd::backward({output});
    }
    busy_ += Clock::now() - step_start;
    if (first_virtual(e.chunk)) return;
    const at::Tensor input = take(inputs_, key, "forward input");
    MEGATRON_ASSERT(input.grad().defined(), "pipeline backward step left no input gradient for micro-batch ",
                    e.microbatch, " chunk ", e.chunk);
    input_grads_[key] = input.grad();
  }

  // One exchange: every transfer from events[begin] up to the next step, sends posted first, then
  // the receives. Returns the index of the next step.
  std::size_t exchange(const std::vector<PipelineEvent>& events, std::size_t begin) {
    std::size_t end = begin;
    while (end < events.size() && is_transfer(events[end].op)) ++end;
    std::vector<std::pair<Key, at::Tensor>> received_inputs, received_grads;
    std::vector<Transfer> sends, receives;
    for (std::size_t j = begin; j < end; ++j) post(events[j], sends, receives, received_inputs, received_grads);
    wait_all(receives);
    for (auto& [k, t] : received_inputs) inputs_[k] = training_ ? t.requires_grad_(true) : t;
    for (auto& [k, t] : received_grads) output_grads_[k] = t;
    // The exchange's sends complete with it, as Megatron's p2p exchanges wait on every request: a
    // released output's data goes with its send here, not whenever the peer gets to it. (On GPUs
    // NCCL's wait orders the streams; the host does not block.)
    wait_all(sends);
    return end;
  }

  PipelineExecutor::Timing timing() const {
    return {std::chrono::duration<double>(busy_).count(), std::chrono::duration<double>(Clock::now() - start_).count()};
  }
  bool finished() const { return outputs_.empty() && output_grads_.empty() && input_grads_.empty(); }

 private:
  using Clock = std::chrono::steady_clock;
  // A posted transfer and what it moves, for the message when it does not complete.
  struct Transfer {
    Work work;
    Key key;
    bool activation;  // else a gradient
    bool sending;
    int peer;
  };

  bool first_virtual(int chunk) const { return stage_ == 0 && chunk == 0; }
  bool last_virtual(int chunk) const { return stage_ == stages_ - 1 && chunk == chunks_ - 1; }
  int next() const { return (stage_ + 1) % stages_; }
  int prev() const { return (stage_ + stages_ - 1) % stages_; }
  int tag(int microbatch, int sender_chunk, bool forward) const {
    return (2 * (microbatch * chunks_ + sender_chunk) + (forward ? 0 : 1)) % 32768;
  }

  void post(const PipelineEvent& t, std::vector<Transfer>& sends, std::vector<Transfer>& receives,
            std::vector<std::pair<Key, at::Tensor>>& received_inputs,
            std::vector<std::pair<Key, at::Tensor>>& received_grads) {
    const Key k{t.microbatch, t.chunk};
    Communicator& comm = *pc_.comm;
    switch (t.op) {
      case PipelineOp::kSendForward: {
        at::Tensor& kept = outputs_.at(k);
        // A copy when the output is not contiguous; else the same storage, which the send holds.
        const at::Tensor out = kept.detach().contiguous();
        sends.push_back({comm.send(out, next(), group_, tag(t.microbatch, t.chunk, true)), k, true, true, next()});
        if (training_) {
          release_data(kept);
        } else {
          outputs_.erase(k);
        }
        break;
      }
      case PipelineOp::kSendBackward:
        sends.push_back({comm.send(take(input_grads_, k, "input gradient").contiguous(), prev(), group_,
                                   tag(t.microbatch, t.chunk, false)),
                         k, false, true, prev()});
        break;
      case PipelineOp::kRecvForward: {
        at::Tensor buffer = at::empty(activation_shape_, options_);
        const int sender_chunk = stage_ == 0 ? t.chunk - 1 : t.chunk;
        receives.push_back({comm.recv(buffer, prev(), group_, tag(t.microbatch, sender_chunk, true)), k, true, false, prev()});
        received_inputs.emplace_back(k, buffer);
        break;
      }
      case PipelineOp::kRecvBackward: {
        at::Tensor buffer = at::empty(activation_shape_, options_);
        const int sender_chunk = stage_ == stages_ - 1 ? t.chunk + 1 : t.chunk;
        receives.push_back({comm.recv(buffer, next(), group_, tag(t.microbatch, sender_chunk, false)), k, false, false,
                            next()});
        received_grads.emplace_back(k, buffer);
        break;
      }
      default:
        MEGATRON_ASSERT(false, "not a transfer");
    }
  }

  // Waits for every transfer; a timeout names the stage and the transfer (the communicator's
  // message names rank, group and operation).
  void wait_all(std::vector<Transfer>& transfers) const {
    for (Transfer& t : transfers) {
      try {
        t.work.wait();
      } catch (const Error& error) {
        MEGATRON_FAIL(error.what(), " [pipeline stage ", stage_, " of ", stages_,
                      t.sending ? " sending the " : " waiting for the ", t.activation ? "activation" : "gradient",
                      " of micro-batch ", t.key.first, ", chunk ", t.key.second, t.sending ? " to stage " : " from stage ",
                      t.peer, "]");
      }
    }
    transfers.clear();
  }

  const ParallelContext& pc_;
  const ProcessGroup& group_;
  const int stage_, stages_, chunks_;
  const std::vector<std::int64_t>& activation_shape_;
  at::TensorOptions options_;
  const PipelineSteps& steps_;
  const bool training_;
  std::map<Key, at::Tensor> inputs_, outputs_, output_grads_, input_grads_;
  const Clock::time_point start_ = Clock::now();
  Clock::duration busy_{};
};

}  // namespace

PipelineExecutor::PipelineExecutor(const ParallelContext& pc, const PipelineShape& shape,
                                   std::vector<std::int64_t> activation_shape, at::TensorOptions options)
    : pc_(&pc), shape_(shape), activation_shape_(std::move(activation_shape)), options_(options) {
  MEGATRON_ASSERT(pc.pp && pc.pp->size() == shape.stages, "the pipeline group has ", pc.pp ? pc.pp->size() : 0,
                  " ranks, the schedule ", shape.stages, " stages");
}

void PipelineExecutor::train(const PipelineSteps& steps) {
  run(pipeline_schedule(shape_, pc_->pp->rank()), steps, true);
}

void PipelineExecutor::forward_only(const PipelineSteps& steps) {
  run(forward_only_schedule(shape_, pc_->pp->rank()), steps, false);
}

void PipelineExecutor::run(const std::vector<PipelineEvent>& events, const PipelineSteps& steps, bool training) {
  ScheduleRun run(*pc_, shape_, activation_shape_, options_, steps, training);
  std::size_t i = 0;
  while (i < events.size()) {
    const PipelineEvent& e = events[i];
    if (e.op == PipelineOp::kForward) {
      run.forward(e);
      ++i;
    } else if (e.op == PipelineOp::kBackward) {
      run.backward(e);
      ++i;
    } else {
      i = run.exchange(events, i);
    }
  }
  timing_ = run.timing();
  MEGATRON_ASSERT(run.finished(), "pipeline executor: the schedule left steps unfinished");
}

}  // namespace megatron::parallel
