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
  const ProcessGroup& group = *pc_->pp;
  const int stage = group.rank(), stages = group.size(), chunks = shape_.chunks;
  const int next = (stage + 1) % stages, prev = (stage + stages - 1) % stages;
  auto first_virtual = [&](int chunk) { return stage == 0 && chunk == 0; };
  auto last_virtual = [&](int chunk) { return stage == stages - 1 && chunk == chunks - 1; };
  auto tag = [&](int microbatch, int sender_chunk, bool forward) {
    return (2 * (microbatch * chunks + sender_chunk) + (forward ? 0 : 1)) % 32768;
  };
  std::map<Key, at::Tensor> inputs, outputs, output_grads, input_grads;
  // A posted transfer and what it moves, for the message when it does not complete.
  struct Transfer {
    Work work;
    Key key;
    bool activation;  // else a gradient
    bool sending;
    int peer;
  };
  // Waits for every transfer; a timeout names the stage and the transfer (the communicator's
  // message names rank, group and operation).
  auto wait_all = [&](std::vector<Transfer>& transfers) {
    for (Transfer& t : transfers) {
      try {
        t.work.wait();
      } catch (const Error& error) {
        MEGATRON_FAIL(error.what(), " [pipeline stage ", stage, " of ", stages,
                      t.sending ? " sending the " : " waiting for the ", t.activation ? "activation" : "gradient",
                      " of micro-batch ", t.key.first, ", chunk ", t.key.second, t.sending ? " to stage " : " from stage ",
                      t.peer, "]");
      }
    }
    transfers.clear();
  };
  using Clock = std::chrono::steady_clock;
  const auto run_start = Clock::now();
  Clock::duration busy{};
  std::size_t i = 0;
  while (i < events.size()) {
    const PipelineEvent& e = events[i];
    const Key key{e.microbatch, e.chunk};
    if (e.op == PipelineOp::kForward) {
      at::Tensor input;
      if (!first_virtual(e.chunk)) input = take(inputs, key, "received input");
      const auto step_start = Clock::now();
      at::Tensor output = steps.forward(e.microbatch, e.chunk, input);
      busy += Clock::now() - step_start;
      MEGATRON_ASSERT(output.defined(), "pipeline forward step returned nothing");
      if (training) {
        if (input.defined()) inputs[key] = input;  // kept for the input gradient
        outputs[key] = output;
      } else if (!last_virtual(e.chunk)) {
        outputs[key] = output;
      }
      ++i;
      continue;
    }
    if (e.op == PipelineOp::kBackward) {
      if (steps.before_backward) steps.before_backward(e.microbatch, e.chunk);
      const at::Tensor output = take(outputs, key, "forward output");
      const at::Tensor output_grad = last_virtual(e.chunk) ? at::Tensor() : take(output_grads, key, "received output gradient");
      const auto step_start = Clock::now();
      if (output_grad.defined()) {
        backward_from_node(output, output_grad);
      } else {
        torch::autograd::backward({output});
      }
      busy += Clock::now() - step_start;
      if (!first_virtual(e.chunk)) {
        const at::Tensor input = take(inputs, key, "forward input");
        MEGATRON_ASSERT(input.grad().defined(), "pipeline backward step left no input gradient for micro-batch ",
                        e.microbatch, " chunk ", e.chunk);
        input_grads[key] = input.grad();
      }
      ++i;
      continue;
    }
    // One exchange: every transfer up to the next step, sends posted first, then the receives.
    std::size_t end = i;
    while (end < events.size() && is_transfer(events[end].op)) ++end;
    std::vector<std::pair<Key, at::Tensor>> received_inputs, received_grads;
    std::vector<Transfer> sends, receives;
    for (std::size_t j = i; j < end; ++j) {
      const PipelineEvent& t = events[j];
      const Key k{t.microbatch, t.chunk};
      switch (t.op) {
        case PipelineOp::kSendForward: {
          at::Tensor& kept = outputs.at(k);
          // A copy when the output is not contiguous; else the same storage, which the send holds.
          const at::Tensor out = kept.detach().contiguous();
          sends.push_back({pc_->comm->send(out, next, group, tag(t.microbatch, t.chunk, true)), k, true, true, next});
          if (training) {
            release_data(kept);
          } else {
            outputs.erase(k);
          }
          break;
        }
        case PipelineOp::kSendBackward:
          sends.push_back({pc_->comm->send(take(input_grads, k, "input gradient").contiguous(), prev, group,
                                           tag(t.microbatch, t.chunk, false)),
                           k, false, true, prev});
          break;
        case PipelineOp::kRecvForward: {
          at::Tensor buffer = at::empty(activation_shape_, options_);
          const int sender_chunk = stage == 0 ? t.chunk - 1 : t.chunk;
          receives.push_back({pc_->comm->recv(buffer, prev, group, tag(t.microbatch, sender_chunk, true)), k, true,
                              false, prev});
          received_inputs.emplace_back(k, buffer);
          break;
        }
        case PipelineOp::kRecvBackward: {
          at::Tensor buffer = at::empty(activation_shape_, options_);
          const int sender_chunk = stage == stages - 1 ? t.chunk + 1 : t.chunk;
          receives.push_back({pc_->comm->recv(buffer, next, group, tag(t.microbatch, sender_chunk, false)), k, false,
                              false, next});
          received_grads.emplace_back(k, buffer);
          break;
        }
        default:
          MEGATRON_ASSERT(false, "not a transfer");
      }
    }
    wait_all(receives);
    for (auto& [k, t] : received_inputs) inputs[k] = training ? t.requires_grad_(true) : t;
    for (auto& [k, t] : received_grads) output_grads[k] = t;
    // The exchange's sends complete with it, as Megatron's p2p exchanges wait on every request: a
    // released output's data goes with its send here, not whenever the peer gets to it. (On GPUs
    // NCCL's wait orders the streams; the host does not block.)
    wait_all(sends);
    i = end;
  }
  timing_ = {std::chrono::duration<double>(busy).count(), std::chrono::duration<double>(Clock::now() - run_start).count()};
  MEGATRON_ASSERT(outputs.empty() && output_grads.empty() && input_grads.empty(),
                  "pipeline executor: the schedule left steps unfinished");
}

}  // namespace megatron::parallel
