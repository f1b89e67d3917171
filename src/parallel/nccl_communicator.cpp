// The NCCL communicator over c10d's ProcessGroupNCCL (see nccl_communicator.h). Compiled with
// MEGATRON_C10D_NCCL=1 in builds with the CUDA LibTorch; elsewhere make_nccl_communicator refuses.
#include "megatron/parallel/nccl_communicator.h"

#include "megatron/core/check.h"

#if MEGATRON_C10D_NCCL
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <map>
#include <mutex>

#include "megatron/parallel/c10d_store.h"
#endif

namespace megatron::parallel {

#if MEGATRON_C10D_NCCL
namespace {

// c10d's Work as ours: test() asks whether the collective finished, wait() orders the current
// CUDA stream after it (and rethrows a failure c10d saw, naming the operation).
class C10dWork final : public Work::Impl {
 public:
  C10dWork(c10::intrusive_ptr<c10d::Work> work, std::string what) : work_(std::move(work)), what_(std::move(what)) {}
  bool test() override { return work_->isCompleted(); }
  void wait() override {
    try {
      work_->wait();
    } catch (const std::exception& e) {
      MEGATRON_FAIL(what_, " failed in NCCL: ", e.what());
    }
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  std::string what_;
};

// A group: the bootstrap's group (ranks, CPU collectives) and, made at the first CUDA operation,
// its ProcessGroupNCCL.
class NcclGroup final : public ProcessGroup {
 public:
  NcclGroup(std::shared_ptr<ProcessGroup> inner, std::string store_prefix)
      : ProcessGroup(inner->name(), inner->ranks(), inner->ranks()[static_cast<std::size_t>(inner->rank())]),
        inner_(std::move(inner)),
        prefix_(std::move(store_prefix)) {}
  const ProcessGroup& inner() const { return *inner_; }

  c10d::Backend& nccl(const c10::intrusive_ptr<c10d::Store>& store, std::chrono::milliseconds timeout) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (!backend_) {
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;
      backend_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(c10::make_intrusive<c10d::PrefixStore>(prefix_, store),
                                                              rank(), size(), options);
    }
    return *backend_;
  }

 private:
  std::shared_ptr<ProcessGroup> inner_;
  std::string prefix_;
  mutable std::mutex mutex_;
  mutable c10::intrusive_ptr<c10d::ProcessGroupNCCL> backend_;
};

c10d::ReduceOp to_c10d(ReduceOp op) { return op == ReduceOp::kMax ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM; }

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(std::unique_ptr<Communicator> bootstrap) : bootstrap_(std::move(bootstrap)) {
    set_timeout(bootstrap_->timeout());
    store_ = make_world_store(*bootstrap_, bootstrap_->timeout());
    world_ = std::make_shared<NcclGroup>(bootstrap_->world(), "world");
  }

  int rank() const override { return bootstrap_->rank(); }
  int world_size() const override { return bootstrap_->world_size(); }
  int local_rank() const override { return bootstrap_->local_rank(); }
  int local_size() const override { return bootstrap_->local_size(); }
  std::string backend() const override {
    return str_cat("NCCL ", NCCL_MAJOR, ".", NCCL_MINOR, ".", NCCL_PATCH, " via PyTorch c10d for CUDA tensors, ",
                   bootstrap_->backend(), " for the rest");
  }

  std::shared_ptr<ProcessGroup> new_group(const std::string& name, const RankGroups& groups) override {
    std::shared_ptr<ProcessGroup> inner = bootstrap_->new_group(name, groups);
    std::size_t index = 0;
    while (index < groups.size() && groups[index] != inner->ranks()) ++index;
    // Every rank of a group names its store keys alike: the group's name, its index and a counter
    // of groups made under that name (groups can be made again).
    const int generation = generations_[name]++;
    return std::make_shared<NcclGroup>(std::move(inner), str_cat(name, "/", generation, "/", index));
  }
  std::shared_ptr<ProcessGroup> world() override { return world_; }

  Work all_reduce(at::Tensor& t, ReduceOp op, const ProcessGroup& g) override {
    const NcclGroup& group = as_nccl(g);
    if (!t.is_cuda()) return bootstrap_->all_reduce(t, op, group.inner());
    std::vector<at::Tensor> tensors{t};
    c10d::AllreduceOptions opts;
    opts.reduceOp = to_c10d(op);
    return wrap(nccl(group).allreduce(tensors, opts), "all-reduce", group);
  }
  Work all_gather(at::Tensor& output, const at::Tensor& input, const ProcessGroup& g) override {
    const NcclGroup& group = as_nccl(g);
    if (!input.is_cuda()) return bootstrap_->all_gather(output, input, group.inner());
    at::Tensor in = input;
    return wrap(nccl(group)._allgather_base(output, in), "all-gather", group);
  }
  Work reduce_scatter(at::Tensor& output, const at::Tensor& input, const ProcessGroup& g) override {
    const NcclGroup& group = as_nccl(g);
    if (!input.is_cuda()) return bootstrap_->reduce_scatter(output, input, group.inner());
    at::Tensor in = input;
    return wrap(nccl(group)._reduce_scatter_base(output, in), "reduce-scatter", group);
  }
  Work broadcast(at::Tensor& t, int root, const ProcessGroup& g) override {
    const NcclGroup& group = as_nccl(g);
    if (!t.is_cuda()) return bootstrap_->broadcast(t, root, group.inner());
    std::vector<at::Tensor> tensors{t};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    return wrap(nccl(group).broadcast(tensors, opts), "broadcast", group);
  }
  Work send(const at::Tensor& t, int peer, const ProcessGroup& g, int tag) override {
    const NcclGroup& group = as_nccl(g);
    if (!t.is_cuda()) return bootstrap_->send(t, peer, group.inner(), tag);
    std::vector<at::Tensor> tensors{t};
    return wrap(nccl(group).send(tensors, peer, tag), "send", group);
  }
  Work recv(at::Tensor& t, int peer, const ProcessGroup& g, int tag) override {
    const NcclGroup& group = as_nccl(g);
    if (!t.is_cuda()) return bootstrap_->recv(t, peer, group.inner(), tag);
    std::vector<at::Tensor> tensors{t};
    return wrap(nccl(group).recv(tensors, peer, tag), "recv", group);
  }
  // On the host, over the bootstrap: what callers of barrier want is the processes in step.
  Work barrier(const ProcessGroup& g) override { return bootstrap_->barrier(as_nccl(g).inner()); }

  [[noreturn]] void abort(int exit_code) override { bootstrap_->abort(exit_code); }

 private:
  static const NcclGroup& as_nccl(const ProcessGroup& g) {
    const auto* group = dynamic_cast<const NcclGroup*>(&g);
    MEGATRON_ASSERT(group != nullptr, "group ", g.describe(), " was not made by the NCCL communicator");
    return *group;
  }
  c10d::Backend& nccl(const NcclGroup& g) const { return g.nccl(store_, timeout()); }
  Work wrap(c10::intrusive_ptr<c10d::Work> work, const char* op, const NcclGroup& g) const {
    return Work(std::make_unique<C10dWork>(std::move(work), str_cat("[rank ", rank(), "] ", op, " on ", g.describe())));
  }

  std::unique_ptr<Communicator> bootstrap_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::shared_ptr<NcclGroup> world_;
  std::map<std::string, int> generations_;
};

}  // namespace

bool nccl_available() { return true; }

std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> bootstrap) {
  return std::make_unique<NcclCommunicator>(std::move(bootstrap));
}

#else

bool nccl_available() { return false; }

std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator>) {
  MEGATRON_FAIL("this build has no NCCL (it was built without the CUDA LibTorch); CUDA tensors cannot be communicated");
}

#endif

}  // namespace megatron::parallel
