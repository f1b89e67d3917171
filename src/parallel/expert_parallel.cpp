// The expert-parallel all-to-all (see expert_parallel.h).
#include "megatron/parallel/expert_parallel.h"

#include <torch/autograd.h>

#include <numeric>

#include "autograd_objects.h"
#include "megatron/core/check.h"

namespace megatron::parallel {
namespace {

constexpr int kTagAllToAll = 7201;

std::vector<std::int64_t> offsets_of(const std::vector<std::int64_t>& splits) {
  std::vector<std::int64_t> offsets(splits.size() + 1, 0);
  std::partial_sum(splits.begin(), splits.end(), offsets.begin() + 1);
  return offsets;
}

// The exchange itself, no autograd: every peer's block sent and received concurrently, this
// rank's own block copied.
at::Tensor exchange(const at::Tensor& input, const std::vector<std::int64_t>& output_splits,
                    const std::vector<std::int64_t>& input_splits, const ProcessGroup& group, Communicator& comm) {
  const int size = group.size(), me = group.rank();
  MEGATRON_CHECK(static_cast<int>(output_splits.size()) == size && static_cast<int>(input_splits.size()) == size,
                 "all_to_all over ", group.describe(), ": ", size, " splits needed, got ", input_splits.size(),
                 " (input) and ", output_splits.size(), " (output)");
  const std::vector<std::int64_t> in = offsets_of(input_splits), out = offsets_of(output_splits);
  MEGATRON_CHECK(in.back() == input.size(0), "all_to_all: the input splits add up to ", in.back(), " rows, the input has ",
                 input.size(0));
  const at::Tensor source = input.contiguous();
  std::vector<std::int64_t> shape = source.sizes().vec();
  shape[0] = out.back();
  at::Tensor result = at::empty(shape, source.options());
  std::vector<Work> pending;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == me) continue;
    if (input_splits[peer] > 0) pending.push_back(comm.send(source.narrow(0, in[peer], input_splits[peer]), peer, group, kTagAllToAll));
    if (output_splits[peer] > 0) {
      at::Tensor slot = result.narrow(0, out[peer], output_splits[peer]);
      pending.push_back(comm.recv(slot, peer, group, kTagAllToAll));
    }
  }
  MEGATRON_CHECK(input_splits[me] == output_splits[me], "all_to_all: this rank keeps ", input_splits[me],
                 " of its rows but expects ", output_splits[me]);
  if (input_splits[me] > 0) result.narrow(0, out[me], output_splits[me]).copy_(source.narrow(0, in[me], input_splits[me]));
  for (Work& w : pending) w.wait();
  return result;
}

class AllToAll : public torch::autograd::Function<AllToAll> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input,
                            const std::vector<std::int64_t>& output_splits, const std::vector<std::int64_t>& input_splits,
                            std::int64_t group_address, std::int64_t comm_address) {
    ctx->saved_data["output_splits"] = output_splits;
    ctx->saved_data["input_splits"] = input_splits;
    ctx->saved_data["group"] = group_address;
    ctx->saved_data["comm"] = comm_address;
    return exchange(input, output_splits, input_splits, detail::object_at<const ProcessGroup>(group_address),
                    detail::object_at<Communicator>(comm_address));
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    // The gradient rows return to where their rows came from: the splits swapped.
    const auto back = exchange(grads[0], ctx->saved_data["input_splits"].toIntVector(),
                               ctx->saved_data["output_splits"].toIntVector(),
                               detail::saved_object<const ProcessGroup>(ctx, "group"),
                               detail::saved_object<Communicator>(ctx, "comm"));
    return {back, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor all_to_all(const at::Tensor& input, const std::vector<std::int64_t>& output_splits,
                      const std::vector<std::int64_t>& input_splits, const ProcessGroup& group, Communicator& comm) {
  return AllToAll::apply(input, output_splits, input_splits, detail::address_of(group), detail::address_of(comm));
}

at::Tensor all_gather_rows(const at::Tensor& input, const std::vector<std::int64_t>& sizes, const ProcessGroup& group,
                           Communicator& comm) {
  const int size = group.size();
  const std::int64_t mine = sizes.at(static_cast<std::size_t>(group.rank()));
  MEGATRON_CHECK(input.size(0) == mine, "all_gather_rows over ", group.describe(), ": this rank has ", input.size(0),
                 " rows but its size says ", mine);
  if (size == 1) return input;
  std::vector<std::int64_t> shape = input.sizes().vec();
  shape.insert(shape.begin(), size);
  std::vector<std::int64_t> flat = input.sizes().vec();
  flat[0] *= size;
  // Every peer gets the whole input; the copies' gradients are summed by expand's backward.
  const at::Tensor copies = input.unsqueeze(0).expand(shape).reshape(flat);
  return all_to_all(copies, sizes, std::vector<std::int64_t>(static_cast<std::size_t>(size), mine), group, comm);
}

at::Tensor reduce_scatter_rows(const at::Tensor& input, const std::vector<std::int64_t>& sizes,
                               const ProcessGroup& group, Communicator& comm) {
  const int size = group.size();
  const std::int64_t mine = sizes.at(static_cast<std::size_t>(group.rank()));
  if (size == 1) return input;
  const at::Tensor received =
      all_to_all(input, std::vector<std::int64_t>(static_cast<std::size_t>(size), mine), sizes, group, comm);
  std::vector<std::int64_t> shape = input.sizes().vec();
  shape[0] = mine;
  shape.insert(shape.begin(), size);
  return received.view(shape).sum(0);
}

at::Tensor sum_bookkeeping(const at::Tensor& input, std::initializer_list<const ProcessGroup*> groups,
                           Communicator& comm) {
  at::Tensor total = input.contiguous();
  for (const ProcessGroup* group : groups) {
    if (group != nullptr && group->size() > 1) comm.all_reduce(total, ReduceOp::kSum, *group).wait();
  }
  return total;
}

at::Tensor gather_bookkeeping(const at::Tensor& input, const ProcessGroup& group, Communicator& comm) {
  std::vector<std::int64_t> shape = input.sizes().vec();
  if (shape.empty()) shape.push_back(1);
  shape[0] *= group.size();
  at::Tensor out = at::empty(shape, input.options());
  comm.all_gather(out, input.contiguous(), group).wait();
  return out;
}

}  // namespace megatron::parallel
