// The param-and-grad buffer and its bucketed DP reduction (see data_parallel.h). Gradients land in
// the buffer in one of two ways. When the grad buffer has the parameters' dtype, each parameter's
// .grad is a view into it: autograd's AccumulateGrad adds a new gradient in place into an existing
// .grad when grad mode is off during backward (no create_graph), which is how backward runs here.
// Otherwise (bf16/fp16 parameters, fp32 gradients: Megatron's main_grad) a hook after each
// AccumulateGrad adds the parameter's .grad into its fp32 view and drops it. The hooks sit on the
// parameters' grad accumulators (AccumulateGrad nodes), kept alive by this object so that every
// forward reuses them; they fire after the gradient has been accumulated.
#include "megatron/parallel/data_parallel.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <numeric>
#include <unordered_set>

#include "megatron/core/check.h"

namespace megatron::parallel {

// Per-iteration state of the reduction, shared (weakly) with the backward hooks.
struct DataParallelBuffers::Core {
  struct Bucket {
    bool started = false;
    int ready_params = 0;  // parameters whose gradient arrived as often as in the first iteration
    int needed_params = 0;
    at::Tensor grad;       // the bucket's view of the grad buffer, alive while the reduction runs
    at::Tensor scattered;  // reduce-scatter output (this rank's shard), copied in at the end
    Work work;
  };

  DataParallelBuffers* owner = nullptr;
  bool is_last_microbatch = true;
  bool learned_counts = false;    // the first iteration with overlap has been seen
  std::vector<int> ready_count;   // per parameter: accumulations in the last micro-batch's backward
  std::vector<int> golden_count;  // the same, learned in the first iteration
  std::vector<Bucket> buckets;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;

  void grad_ready(int param);
  void reset();

  // Main-grad mode: moves the gradient AccumulateGrad left in .grad into the buffer (in the
  // buffer's dtype) and drops it. Registered before ReadyHook, so it runs first.
  class MainGradHook final : public torch::autograd::FunctionPostHook {
   public:
    MainGradHook(at::Tensor param, at::Tensor main_grad) : param_(std::move(param)), main_grad_(std::move(main_grad)) {}
    torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                              const torch::autograd::variable_list& /*inputs*/) override {
      at::Tensor& grad = param_.mutable_grad();
      if (grad.defined()) {
        const at::NoGradGuard no_grad;
        main_grad_.add_(grad);
        grad.reset();
      }
      return outputs;
    }

   private:
    at::Tensor param_;      // shares the parameter's TensorImpl (and its .grad)
    at::Tensor main_grad_;  // the parameter's view of the grad buffer
  };

  // Runs after AccumulateGrad added a parameter's gradient into the buffer.
  class ReadyHook final : public torch::autograd::FunctionPostHook {
   public:
    ReadyHook(std::weak_ptr<Core> core, int param) : core_(std::move(core)), param_(param) {}
    torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                              const torch::autograd::variable_list& /*inputs*/) override {
      if (auto core = core_.lock()) core->grad_ready(param_);
      return outputs;
    }

   private:
    std::weak_ptr<Core> core_;
    int param_;
  };
};

void DataParallelBuffers::Core::grad_ready(int param) {
  if (!is_last_microbatch) return;
  const int count = ++ready_count[param];
  if (!learned_counts) return;  // the first iteration launches everything in finish_grad_sync
  const int bucket = owner->layout_.param_bucket[param];
  MEGATRON_CHECK(count <= golden_count[param], "the gradient of ", owner->params_[param].first, " was accumulated ",
                 count, " times in this iteration's last micro-batch but ", golden_count[param],
                 " times in the first iteration's, so the data-parallel reduction of its bucket may already have "
                 "started; call set_last_microbatch(false) before every micro-batch but the last (parameters used "
                 "in some iterations only cannot use --overlap-grad-reduce)");
  if (count == golden_count[param] && ++buckets[bucket].ready_params == buckets[bucket].needed_params) {
    owner->start_bucket(bucket);
  }
  // A communicator may advance a collective only inside its calls (MPI on CPU): poll the buckets
  // in flight while the backward pass goes on.
  for (auto& b : buckets) {
    if (b.work.pending()) b.work.test();
  }
}

void DataParallelBuffers::Core::reset() {
  for (auto& b : buckets) {
    if (b.work.pending()) b.work.wait();
    b.started = false;
    b.ready_params = 0;
    b.grad = at::Tensor();
    b.scattered = at::Tensor();
  }
  std::fill(ready_count.begin(), ready_count.end(), 0);
}

DataParallelBuffers::DataParallelBuffers(const NamedTensors& params, std::vector<TensorParallelLayout> layouts,
                                         const ParallelContext& pc, const DataParallelConfig& config)
    : params_(params), layouts_(std::move(layouts)), pc_(&pc), config_(config), core_(std::make_shared<Core>()) {
  MEGATRON_ASSERT(params_.size() == layouts_.size(), params_.size(), " parameters but ", layouts_.size(), " layouts");
  MEGATRON_ASSERT(pc.state && pc.comm && pc.dp && pc.dp_cp && pc.tp, "incomplete parallel context");
  MEGATRON_CHECK(!params_.empty(), "the data-parallel buffer needs at least one parameter");
  std::vector<std::int64_t> numels;
  std::unordered_set<const void*> seen;
  const at::Tensor& first = params_.front().second;
  for (const auto& [name, p] : params_) {
    MEGATRON_CHECK(p.defined() && p.requires_grad() && p.is_leaf(), "parameter ", name,
                   " must be a defined leaf tensor that requires grad");
    MEGATRON_CHECK(p.scalar_type() == first.scalar_type() && p.device() == first.device(), "parameter ", name, " is ",
                   p.scalar_type(), " on ", p.device(), " but ", params_.front().first, " is ", first.scalar_type(),
                   " on ", first.device(), "; one buffer holds one dtype on one device");
    MEGATRON_CHECK(seen.insert(p.unsafeGetTensorImpl()).second, "parameter ", name, " is listed twice");
    numels.push_back(p.numel());
  }
  // The dense parameters' buckets, then the expert weights', each padded for its own group.
  const auto bucket_size = effective_bucket_size(config_, pc.dp->size(), pc.state->pp_rank());
  for (const bool expert : {false, true}) {
    std::vector<int> which;
    std::vector<std::int64_t> part_numels;
    std::vector<bool> own_bucket;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (layouts_[i].expert_parallel != expert) continue;
      which.push_back(static_cast<int>(i));
      part_numels.push_back(numels[i]);
      own_bucket.push_back(layouts_[i].shared_embedding && config_.use_distributed_optimizer);
    }
    if (which.empty()) continue;
    MEGATRON_ASSERT(!expert || pc.expert_dp, "expert weights need the expert-data-parallel group");
    const int group_size = expert ? pc.expert_dp->size() : pc.dp_cp->size();
    BufferLayout part = make_buffer_layout(part_numels, bucket_size, group_size, config_.use_distributed_optimizer,
                                           own_bucket);
    const std::int64_t base = layout_.numel;
    const int first_bucket = static_cast<int>(layout_.buckets.size());
    layout_.params.resize(params_.size());
    layout_.param_bucket.resize(params_.size());
    for (std::size_t k = 0; k < which.size(); ++k) {
      const std::size_t i = static_cast<std::size_t>(which[k]);
      layout_.params[i] = {part.params[k].begin + base, part.params[k].end + base};
      layout_.param_bucket[i] = part.param_bucket[k] + first_bucket;
    }
    for (BufferLayout::Bucket& b : part.buckets) {
      b.range = {b.range.begin + base, b.range.end + base};
      for (int& p : b.params) p = which[static_cast<std::size_t>(p)];
      b.expert = expert;
      layout_.buckets.push_back(std::move(b));
    }
    layout_.numel += part.numel;
  }
  param_data_ = at::zeros({layout_.numel}, first.options().requires_grad(false));
  const at::ScalarType grad_dtype = config_.grad_in_fp32 ? at::kFloat : first.scalar_type();
  grad_data_ = at::zeros({layout_.numel}, first.options().dtype(grad_dtype).requires_grad(false));
  main_grad_mode_ = grad_dtype != first.scalar_type();
  {
    at::NoGradGuard no_grad;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      at::Tensor p = params_[i].second;
      const Range r = layout_.params[i];
      at::Tensor view = param_data_.narrow(0, r.begin, r.numel()).view(p.sizes());
      view.copy_(p);
      p.set_data(view);
    }
  }
  core_->owner = this;
  core_->ready_count.assign(params_.size(), 0);
  core_->buckets.resize(layout_.buckets.size());
  zero_grad();
  if (config_.overlap_grad_reduce || main_grad_mode_) register_hooks();
}

DataParallelBuffers::~DataParallelBuffers() {
  // While an error unwinds, reductions in flight are abandoned (Work's rule), not waited for: a
  // wait could take a whole timeout per bucket before the error is even printed.
  if (std::uncaught_exceptions() > 0) return;
  try {
    core_->reset();
  } catch (const std::exception& e) {
    report_error(e);
  }
}

void DataParallelBuffers::register_hooks() {
  for (std::size_t i = 0; i < params_.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(params_[i].second);
    MEGATRON_ASSERT(accumulator, "no gradient accumulator for ", params_[i].first);
    if (main_grad_mode_) {
      accumulator->add_post_hook(std::make_unique<Core::MainGradHook>(params_[i].second, grad(static_cast<int>(i))));
    }
    if (config_.overlap_grad_reduce) {
      accumulator->add_post_hook(std::make_unique<Core::ReadyHook>(core_, static_cast<int>(i)));
    }
    core_->accumulators.push_back(std::move(accumulator));
  }
}

const ProcessGroup& DataParallelBuffers::group(int bucket) const {
  return layout_.buckets.at(static_cast<std::size_t>(bucket)).expert ? *pc_->expert_dp : *pc_->dp_cp;
}

Range DataParallelBuffers::owned_range(int bucket) const {
  const Range r = layout_.buckets.at(static_cast<std::size_t>(bucket)).range;
  if (!config_.use_distributed_optimizer) return r;
  const ProcessGroup& g = group(bucket);
  const std::int64_t shard = r.numel() / g.size();
  return {r.begin + shard * g.rank(), r.begin + shard * (g.rank() + 1)};
}

bool DataParallelBuffers::counts_owned_range(int bucket) const {
  return config_.use_distributed_optimizer || group(bucket).rank() == 0;
}

at::Tensor DataParallelBuffers::grad(int param) const {
  const Range r = layout_.params.at(static_cast<std::size_t>(param));
  return grad_data_.narrow(0, r.begin, r.numel()).view(params_[static_cast<std::size_t>(param)].second.sizes());
}

void DataParallelBuffers::zero_grad() {
  core_->reset();
  grad_data_.zero_();
  for (std::size_t i = 0; i < params_.size(); ++i) {
    at::Tensor& grad = params_[i].second.mutable_grad();
    if (main_grad_mode_) {
      grad.reset();
      continue;
    }
    const Range r = layout_.params[i];
    const void* want = static_cast<const char*>(grad_data_.data_ptr()) + r.begin * grad_data_.element_size();
    if (!grad.defined() || grad.data_ptr() != want || grad.sizes() != params_[i].second.sizes()) {
      grad = grad_data_.narrow(0, r.begin, r.numel()).view(params_[i].second.sizes());
    }
  }
}

void DataParallelBuffers::set_last_microbatch(bool last) { core_->is_last_microbatch = last; }

int DataParallelBuffers::started_buckets() const {
  return static_cast<int>(
      std::count_if(core_->buckets.begin(), core_->buckets.end(), [](const Core::Bucket& b) { return b.started; }));
}

void DataParallelBuffers::start_bucket(int bucket) {
  Core::Bucket& b = core_->buckets[static_cast<std::size_t>(bucket)];
  MEGATRON_ASSERT(!b.started, "bucket ", bucket, " started twice");
  b.started = true;
  const ProcessGroup& g = group(bucket);
  // Megatron's gradient_scaling_factor: the sum below is then the average over DP x CP (for
  // expert weights too, whose group may have a single rank).
  const double scale = 1.0 / pc_->dp_cp->size();
  if (g.size() == 1 && scale == 1.0) return;
  at::NoGradGuard no_grad;
  const Range r = layout_.buckets[static_cast<std::size_t>(bucket)].range;
  b.grad = grad_data_.narrow(0, r.begin, r.numel());
  b.grad.mul_(scale);
  if (g.size() == 1) {
    b.grad = at::Tensor();
  } else if (config_.use_distributed_optimizer) {
    b.scattered = at::empty({r.numel() / g.size()}, grad_data_.options());
    b.work = pc_->comm->reduce_scatter(b.scattered, b.grad, g);
  } else {
    b.work = pc_->comm->all_reduce(b.grad, ReduceOp::kSum, g);
  }
}

void DataParallelBuffers::finish_grad_sync() {
  Core& core = *core_;
  if (config_.overlap_grad_reduce && !core.learned_counts &&
      std::any_of(core.ready_count.begin(), core.ready_count.end(), [](int c) { return c > 0; })) {
    core.golden_count = core.ready_count;
    core.learned_counts = true;
    for (std::size_t b = 0; b < layout_.buckets.size(); ++b) {
      int needed = 0;
      for (int p : layout_.buckets[b].params) needed += core.golden_count[static_cast<std::size_t>(p)] > 0;
      core.buckets[b].needed_params = needed;
    }
  }
  for (std::size_t b = 0; b < core.buckets.size(); ++b) {
    if (!core.buckets[b].started) start_bucket(static_cast<int>(b));
  }
  at::NoGradGuard no_grad;
  for (std::size_t b = 0; b < core.buckets.size(); ++b) {
    Core::Bucket& bucket = core.buckets[b];
    bucket.work.wait();
    if (bucket.scattered.defined()) {
      const Range owned = owned_range(static_cast<int>(b));
      grad_data_.narrow(0, owned.begin, owned.numel()).copy_(bucket.scattered);
    }
  }
  core.reset();
}

void DataParallelBuffers::all_gather_params() {
  if (!config_.use_distributed_optimizer) return;
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> shards, outputs;
  std::vector<Work> works;
  for (std::size_t b = 0; b < layout_.buckets.size(); ++b) {
    const ProcessGroup& g = group(static_cast<int>(b));
    if (g.size() == 1) continue;
    const Range r = layout_.buckets[b].range;
    const Range owned = owned_range(static_cast<int>(b));
    shards.push_back(param_data_.narrow(0, owned.begin, owned.numel()).clone());
    outputs.push_back(param_data_.narrow(0, r.begin, r.numel()));
    works.push_back(pc_->comm->all_gather(outputs.back(), shards.back(), g));
  }
  for (auto& w : works) w.wait();
}

namespace {

// Sums the gradients of the parameters `selected` picks over `group` (one coalesced all-reduce).
void allreduce_grads(const DataParallelBuffers& buffers, bool (*selected)(const TensorParallelLayout&),
                     const ProcessGroup& group) {
  if (group.size() == 1) return;
  std::vector<at::Tensor> grads;
  for (std::size_t i = 0; i < buffers.params().size(); ++i) {
    if (selected(buffers.layouts()[i])) grads.push_back(buffers.grad(static_cast<int>(i)));
  }
  if (grads.empty()) return;
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> flat_parts;
  for (const auto& g : grads) flat_parts.push_back(g.reshape({-1}));
  at::Tensor flat = at::cat(flat_parts);
  buffers.context().comm->all_reduce(flat, ReduceOp::kSum, group).wait();
  std::int64_t offset = 0;
  for (auto& g : grads) {
    g.copy_(flat.narrow(0, offset, g.numel()).view(g.sizes()));
    offset += g.numel();
  }
}

}  // namespace

void allreduce_shared_embedding_grads(const DataParallelBuffers& buffers) {
  allreduce_grads(buffers, [](const TensorParallelLayout& l) { return l.shared_embedding; },
                  *buffers.context().embedding);
}

void allreduce_sequence_parallel_grads(const DataParallelBuffers& buffers) {
  allreduce_grads(buffers, [](const TensorParallelLayout& l) { return l.sequence_parallel; }, *buffers.context().tp);
}

}  // namespace megatron::parallel
