// The tensor-parallel regions (see mappings.h): each a torch::autograd::Function made from two
// collectives, one for forward and one for backward. Collectives copy into fresh contiguous
// buffers (inputs and incoming gradients are never modified in place).
#include "megatron/parallel/mappings.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "autograd_objects.h"
#include "megatron/core/check.h"

namespace megatron::parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using Collective = at::Tensor (*)(const at::Tensor&, const ParallelContext&);

const ProcessGroup& tp_group(const ParallelContext& pc) {
  MEGATRON_ASSERT(pc.tp != nullptr && pc.comm != nullptr, "the parallel context has no TP group or communicator");
  return *pc.tp;
}

void check_divisible(const at::Tensor& x, std::int64_t dim, const ParallelContext& pc, const char* what) {
  const int tp = tp_group(pc).size();
  MEGATRON_CHECK(x.dim() > 0 && x.size(dim) % tp == 0, what, ": size ", x.dim() > 0 ? x.size(dim) : 0,
                 " along dim ", dim, " of a tensor of shape ", x.sizes(), " is not divisible by the size (", tp,
                 ") of ", tp_group(pc).describe());
}

at::Tensor identity(const at::Tensor& x, const ParallelContext&) { return x; }

at::Tensor all_reduce_sum(const at::Tensor& x, const ParallelContext& pc) {
  at::Tensor y = x.clone(at::MemoryFormat::Contiguous);
  pc.comm->all_reduce(y, ReduceOp::kSum, tp_group(pc)).wait();
  return y;
}

at::Tensor split_first_dim(const at::Tensor& x, const ParallelContext& pc) {
  check_divisible(x, 0, pc, "splitting along the sequence");
  const std::int64_t chunk = x.size(0) / tp_group(pc).size();
  return x.narrow(0, tp_group(pc).rank() * chunk, chunk).clone(at::MemoryFormat::Contiguous);
}

at::Tensor gather_first_dim(const at::Tensor& x, const ParallelContext& pc) {
  const at::Tensor input = x.contiguous();
  std::vector<std::int64_t> sizes = input.sizes().vec();
  MEGATRON_ASSERT(!sizes.empty(), "cannot gather a 0-d tensor");
  sizes[0] *= tp_group(pc).size();
  at::Tensor output = at::empty(sizes, input.options());
  pc.comm->all_gather(output, input, tp_group(pc)).wait();
  return output;
}

at::Tensor reduce_scatter_first_dim(const at::Tensor& x, const ParallelContext& pc) {
  check_divisible(x, 0, pc, "reduce-scattering along the sequence");
  const at::Tensor input = x.contiguous();
  std::vector<std::int64_t> sizes = input.sizes().vec();
  sizes[0] /= tp_group(pc).size();
  at::Tensor output = at::empty(sizes, input.options());
  pc.comm->reduce_scatter(output, input, tp_group(pc)).wait();
  return output;
}

at::Tensor split_last_dim(const at::Tensor& x, const ParallelContext& pc) {
  check_divisible(x, -1, pc, "splitting along the last dim");
  const std::int64_t chunk = x.size(-1) / tp_group(pc).size();
  return x.narrow(-1, tp_group(pc).rank() * chunk, chunk).clone(at::MemoryFormat::Contiguous);
}

// The communicator concatenates along the flat buffer: move the last dim first, gather, move back.
at::Tensor gather_last_dim(const at::Tensor& x, const ParallelContext& pc) {
  return gather_first_dim(x.movedim(-1, 0), pc).movedim(0, -1).contiguous();
}

// A region: forward runs Forward, backward runs Backward on the incoming gradient.
template <Collective Forward, Collective Backward>
struct Region : torch::autograd::Function<Region<Forward, Backward>> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, std::int64_t pc_address) {
    ctx->saved_data["pc"] = pc_address;
    return Forward(x, detail::object_at<const ParallelContext>(pc_address));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {Backward(grads[0], detail::saved_object<const ParallelContext>(ctx, "pc")), at::Tensor()};
  }
};

template <Collective Forward, Collective Backward>
at::Tensor apply_region(const at::Tensor& x, const ParallelContext& pc) {
  if (tp_group(pc).size() == 1) return x;
  return Region<Forward, Backward>::apply(x, detail::address_of(pc));
}

}  // namespace

at::Tensor copy_to_tensor_parallel_region(const at::Tensor& x, const ParallelContext& pc) {
  return apply_region<identity, all_reduce_sum>(x, pc);
}

at::Tensor reduce_from_tensor_parallel_region(const at::Tensor& x, const ParallelContext& pc) {
  return apply_region<all_reduce_sum, identity>(x, pc);
}

at::Tensor scatter_to_tensor_parallel_region(const at::Tensor& x, const ParallelContext& pc) {
  return apply_region<split_last_dim, gather_last_dim>(x, pc);
}

at::Tensor gather_from_tensor_parallel_region(const at::Tensor& x, const ParallelContext& pc) {
  return apply_region<gather_last_dim, split_last_dim>(x, pc);
}

at::Tensor scatter_to_sequence_parallel_region(const at::Tensor& x, const ParallelContext& pc) {
  return apply_region<split_first_dim, gather_first_dim>(x, pc);
}

at::Tensor gather_from_sequence_parallel_region(const at::Tensor& x, const ParallelContext& pc) {
  return apply_region<gather_first_dim, reduce_scatter_first_dim>(x, pc);
}

at::Tensor reduce_scatter_to_sequence_parallel_region(const at::Tensor& x, const ParallelContext& pc) {
  return apply_region<reduce_scatter_first_dim, gather_first_dim>(x, pc);
}

}  // namespace megatron::parallel
