// Counter-based, name-keyed parameter initialisation (see parameter_init.h).
#include "megatron/parallel/parameter_init.h"

#include "megatron/core/check.h"
#include "megatron/kernels/aten/init_ops.h"
#include "megatron/parallel/tensor_parallel.h"

namespace megatron::parallel {
namespace {

std::uint64_t fnv1a(std::string_view a, std::string_view b) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const std::string_view part : {a, b}) {
    for (const char c : part) {
      h ^= static_cast<unsigned char>(c);
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

ParameterInit ParameterInit::loaded_later() { return ParameterInit(0, {}, false); }

ParameterInit ParameterInit::scope(std::string_view prefix) const {
  return ParameterInit(seed_, prefix_ + std::string(prefix), draws_);
}

std::uint64_t ParameterInit::key(std::string_view name) const {
  return splitmix64(seed_ ^ splitmix64(fnv1a(prefix_, name)));
}

at::Tensor ParameterInit::draw(std::string_view name, at::IntArrayRef shape, double std,
                               const TensorParallelLayout& layout, int tp_rank, int tp_size, std::int64_t base,
                               const at::TensorOptions& options) const {
  const at::Device device = options.has_device() ? options.device() : at::Device(at::kCPU);
  at::Tensor out = at::empty(shard_shape(shape, layout, tp_size), at::TensorOptions().dtype(at::kFloat).device(device));
  if (draws_) {
    if (std == 0.0) {
      out.zero_();
    } else {
      kernels::ShardRuns runs = shard_runs(shape, layout, tp_rank, tp_size);
      runs.base += base;
      kernels::fill_counter_normal(out, key(name), std, runs);
    }
  }
  if (options.has_dtype()) out = out.to(options.dtype());
  return out.set_requires_grad(true);
}

at::Tensor ParameterInit::normal(std::string_view name, at::IntArrayRef full_shape, double std,
                                 const TensorParallelLayout& layout, const ParallelContext& pc,
                                 const at::TensorOptions& options) const {
  return draw(name, full_shape, std, layout, tp_rank(pc), tp_size(pc), 0, options);
}

at::Tensor ParameterInit::normal_experts(std::string_view name, at::IntArrayRef full_shape, double std,
                                         const TensorParallelLayout& layout, int ep_rank, int ep,
                                         const ParallelContext& pc, const at::TensorOptions& options) const {
  MEGATRON_CHECK(!full_shape.empty() && full_shape[0] % ep == 0, "Number of experts should be a multiple of expert "
                 "model parallel_size. (", name, ": ", full_shape, " over ", ep, " ranks)");
  std::vector<std::int64_t> block(full_shape.begin(), full_shape.end());
  block[0] /= ep;
  const std::int64_t block_numel = c10::multiply_integers(block);
  return draw(name, block, std, layout, expert_tp_rank(pc), expert_tp_size(pc), ep_rank * block_numel, options);
}

at::Tensor ParameterInit::full(std::string_view name, at::IntArrayRef full_shape, double std) const {
  return draw(name, full_shape, std, TensorParallelLayout{}, 0, 1, 0, at::TensorOptions()).detach();
}

at::Tensor zeros_parameter(at::IntArrayRef full_shape, const TensorParallelLayout& layout, const ParallelContext& pc,
                           const at::TensorOptions& options) {
  return at::zeros(shard_shape(full_shape, layout, tp_size(pc)), options).set_requires_grad(true);
}

}  // namespace megatron::parallel
