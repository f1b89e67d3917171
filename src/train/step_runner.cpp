// One iteration of this rank's work (see step_runner.h).
#include "megatron/train/step_runner.h"

#include <algorithm>
#include <cmath>

#include "megatron/core/check.h"
#include "megatron/model/moe_layer.h"
#include "megatron/parallel/parallel_state.h"

namespace megatron::train {

StepRunner::StepRunner(StepModel model, StepSettings settings, const parallel::ParallelContext& pc)
    : model_(std::move(model)), settings_(settings), pc_(pc) {}

std::pair<at::Tensor, double> StepRunner::run_microbatches(BatchReader* reader, bool training, std::int64_t iteration) {
  model::ForwardContext ctx = training ? model::ForwardContext{true, model_.default_gen, model_.model_parallel_gen}
                                       : model::ForwardContext{false, nullptr, nullptr};
  const int microbatches = settings_.num_microbatches;
  const double loss_scale = training ? model_.optimizer->loss_scale() : 1.0;
  // The MoE auxiliary losses enter the backward as the main loss does: times the loss scale, over
  // the micro-batches, and times CP, since the gradient average over DP x CP divides the CP ranks'
  // parts by CP (Megatron-LM's MoEAuxLossAutoScaler scale since its fix; core_v0.12 left out CP).
  moe_losses_ = {};
  ctx.moe_aux_loss_scale = loss_scale * pc_.state->cp() / microbatches;
  ctx.moe_losses = &moe_losses_;
  std::vector<MicroBatch> batches;
  if (settings_.reads_data) {
    for (int m = 0; m < microbatches; ++m) {
      auto batch = reader->next();
      MEGATRON_CHECK(batch.has_value(), "the ", training ? "training" : "evaluation", " data ran out at iteration ",
                     iteration, "; this is a bug in the sample counts");
      batches.push_back(std::move(*batch));
    }
  }
  // The losses stay tensors (on the model's device) until the step is done: no host
  // synchronisation per micro-batch.
  at::Tensor loss_sum;
  double tokens = 0.0;
  const double cp = pc_.state->cp();
  parallel::PipelineSteps steps;
  steps.forward = [&](int m, int c, const at::Tensor& input) {
    model::GptModel& chunk = *model_.chunks[static_cast<std::size_t>(c)];
    if (!chunk.pre_process()) chunk.set_input_tensor(input);
    static const MicroBatch kNone{};
    const MicroBatch& b = settings_.reads_data ? batches[static_cast<std::size_t>(m)] : kNone;
    const at::Tensor out = chunk.forward(chunk.pre_process() ? b.tokens : at::Tensor(),
                                         chunk.pre_process() ? b.position_ids : at::Tensor(), b.attention_mask,
                                         chunk.post_process() ? b.labels : at::Tensor(), ctx);
    if (!chunk.post_process()) return out;
    const at::Tensor sum = (out * b.loss_mask).sum();
    loss_sum = loss_sum.defined() ? loss_sum + sum.detach() : sum.detach();
    tokens += b.local_loss_tokens;  // summed over DP x CP for the printed loss
    // The backward scalar; times the loss scale with a scaler (fp16), which the optimizer divides out.
    // Under context parallelism each rank holds part of the sequence's loss over all its tokens,
    // times CP: the gradient average over DP x CP divides the CP ranks' sum by CP again.
    return (sum / std::max(1.0, b.loss_tokens)) * (cp * loss_scale / microbatches);
  };
  if (training) {
    steps.before_backward = [&](int m, int) { model_.ddp->set_last_microbatch(m == microbatches - 1); };
    model_.executor->train(steps);
  } else {
    at::NoGradGuard no_grad;
    model_.executor->forward_only(steps);
  }
  return {loss_sum, tokens};
}

double StepRunner::mean_over_dp(const at::Tensor& loss_sum, double tokens) const {
  // On the host (the MPI communicator's tensors; one small copy per step); no micro-batches: zero.
  const auto options = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor sum = loss_sum.defined() ? loss_sum.detach().to(at::kCPU, at::kDouble) : at::zeros({}, options);
  at::Tensor both = at::stack({sum, at::scalar_tensor(tokens, options)});
  pc_.comm->all_reduce(both, parallel::ReduceOp::kSum, *pc_.dp_cp).wait();
  const double* v = both.data_ptr<double>();
  return v[0] / std::max(1.0, v[1]);
}

void StepRunner::report_moe_losses(StepReport& report) const {
  const model::ModelConfig& config = model_.chunks.front()->config();
  const model::MoeConfig& moe = config.moe;
  const int layers = moe.num_moe_layers(config.num_layers);
  if (layers == 0) return;
  // Megatron's track_moe_metrics: per layer, summed over the pipeline stages (each holds its own
  // layers) and averaged over DP and over the micro-batches; the line's value is the layers' sum
  // over the MoE layers. All ranks take part; every rank gets the values.
  // [2, layers] assembled where the values are, then one copy to the host (not one per layer).
  at::Device device = at::kCPU;
  for (const auto* per_layer : {&moe_losses_.z_loss, &moe_losses_.load_balancing_loss}) {
    for (const at::Tensor& value : *per_layer) {
      if (value.defined()) device = value.device();
    }
  }
  const auto zero = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(device));
  const auto row = [&](const std::vector<at::Tensor>& per_layer) {
    std::vector<at::Tensor> values;
    for (std::size_t i = 0; i < static_cast<std::size_t>(config.num_layers); ++i) {
      values.push_back(i < per_layer.size() && per_layer[i].defined() ? per_layer[i].to(at::kDouble) : zero);
    }
    return at::stack(values);
  };
  at::Tensor sums = at::stack({row(moe_losses_.z_loss), row(moe_losses_.load_balancing_loss)}).to(at::kCPU);
  // One sum over the world: over the stages' layers and DP (averaged below), and over the
  // sequence-parallel ranks, each holding its part of the load-balancing loss (summed, as
  // Megatron's tracker reduces it) and the z-loss of its tokens (averaged).
  pc_.comm->all_reduce(sums, parallel::ReduceOp::kSum, *pc_.world).wait();
  sums[0] /= static_cast<double>(pc_.tp->size() * pc_.cp->size());
  sums /= static_cast<double>(pc_.dp->size()) * settings_.num_microbatches;
  const auto report_one = [&](const std::string& name, const at::Tensor& per_layer) {
    report.moe_losses.emplace_back(name, per_layer.sum().item<double>() / layers);
    if (!settings_.moe_per_layer_logging) return;
    for (int i = 0; i < config.num_layers; ++i) {
      report.moe_layer_losses.emplace_back("moe/" + name + "_layer_" + std::to_string(i), per_layer[i].item<double>());
    }
  };
  if (moe.z_loss_coeff > 0) report_one("z_loss", sums[0]);
  if (moe.aux_loss_coeff > 0 && moe.load_balancing != model::LoadBalancing::kNone) {
    report_one("load_balancing_loss", sums[1]);
  }
}

void StepRunner::finalize_grads() {
  model_.ddp->finish_grad_sync();
  parallel::allreduce_sequence_parallel_grads(*model_.ddp);
  parallel::allreduce_shared_embedding_grads(*model_.ddp);
  std::vector<const model::Router*> routers;
  for (const model::GptModel* chunk : model_.chunks) {
    for (const model::MoeLayer* moe : chunk->moe_layers()) routers.push_back(&moe->router());
  }
  model::update_expert_biases(routers, pc_);
}

StepReport StepRunner::train(BatchReader* reader, std::int64_t iteration, double lr, double wd) {
  const parallel::ParallelState& ps = *pc_.state;
  model_.ddp->zero_grad();
  const auto [loss_sum, tokens] = run_microbatches(reader, true, iteration);
  finalize_grads();
  StepReport report;
  report_moe_losses(report);
  // The loss exists on the last pipeline stage, which prints it.
  if (ps.is_last_stage()) {
    report.loss = mean_over_dp(loss_sum, tokens);
    MEGATRON_CHECK(std::isfinite(report.loss), "iteration ", iteration, " on rank ", ps.rank(),
                   ": the loss is not finite (", report.loss, "); stopping. Lower --lr or check the data");
  }
  const optim::StepResult step = model_.optimizer->step(lr, wd, settings_.clip_grad);
  // Without a loss scaler an inf/NaN gradient cannot be skipped: stop and say so (with one, an
  // overflow is the scaler's signal and the step was skipped).
  MEGATRON_CHECK(step.skipped || std::isfinite(step.grad_norm), "iteration ", iteration, " on rank ", ps.rank(),
                 ": the gradient norm is not finite; stopping",
                 settings_.mixed_precision ? "" : " (mixed precision with --fp16 would skip it)");
  report.skipped = step.skipped;
  report.grad_norm = step.grad_norm;
  return report;
}

double StepRunner::evaluate(BatchReader* reader, std::int64_t steps, std::int64_t iteration) {
  at::Tensor loss_sum;
  double tokens = 0.0;
  for (std::int64_t i = 0; i < steps; ++i) {
    const auto [sum, count] = run_microbatches(reader, false, iteration);
    if (sum.defined()) loss_sum = loss_sum.defined() ? loss_sum + sum : sum;
    tokens += count;
  }
  return pc_.state->is_last_stage() ? mean_over_dp(loss_sum, tokens) : 0.0;
}

}  // namespace megatron::train
