// The launcher-independent parts of communicator.h: process groups, Work, the single-process
// communicator (world size 1), and the choice between it and MPI from the launcher's environment.
// The single-process communicator supports every operation on groups of its one rank: collectives
// copy or do nothing, a send to itself is queued for the next recv (in order; tags are not used).
#include "megatron/parallel/communicator.h"

#include <ATen/ops/empty.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <iostream>
#include <string_view>

#include "megatron/core/check.h"
#include "mpi_communicator.h"

namespace megatron::parallel {
namespace {

// A non-negative integer from the environment, or -1 when unset or not a number.
int env_int(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return -1;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  return (*end == '\0' && parsed >= 0 && parsed < (1L << 30)) ? static_cast<int>(parsed) : -1;
}

class SingleProcessCommunicator final : public Communicator {
 public:
  SingleProcessCommunicator() : world_(std::make_shared<ProcessGroup>("world", std::vector<int>{0}, 0)) {}

  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  std::string backend() const override { return "single process"; }

  std::shared_ptr<ProcessGroup> new_group(const std::string& name, const RankGroups& groups) override {
    MEGATRON_ASSERT(groups.size() == 1 && groups[0] == std::vector<int>{0}, "group ", name,
                    " of a single-process world must be {0}");
    return std::make_shared<ProcessGroup>(name, std::vector<int>{0}, 0);
  }
  std::shared_ptr<ProcessGroup> world() override { return world_; }

  Work all_reduce(at::Tensor& t, ReduceOp, const ProcessGroup& g) override {
    check(g);
    (void)t;
    return {};
  }
  Work all_gather(at::Tensor& output, const at::Tensor& input, const ProcessGroup& g) override {
    check(g);
    MEGATRON_ASSERT(output.numel() == input.numel(), "all_gather of ", input.numel(), " into ", output.numel());
    output.view({-1}).copy_(input.reshape({-1}));
    return {};
  }
  Work reduce_scatter(at::Tensor& output, const at::Tensor& input, const ProcessGroup& g) override {
    check(g);
    MEGATRON_ASSERT(output.numel() == input.numel(), "reduce_scatter of ", input.numel(), " into ", output.numel());
    output.view({-1}).copy_(input.reshape({-1}));
    return {};
  }
  Work broadcast(at::Tensor&, int root, const ProcessGroup& g) override {
    check(g);
    MEGATRON_ASSERT(root == 0, "broadcast from rank ", root, " of a one-rank group");
    return {};
  }
  Work send(const at::Tensor& t, int peer, const ProcessGroup& g, int /*tag*/) override {
    check(g);
    MEGATRON_ASSERT(peer == 0, "send to rank ", peer, " of a one-rank group");
    queue_.push_back(t.clone());
    return {};
  }
  Work recv(at::Tensor& t, int peer, const ProcessGroup& g, int /*tag*/) override {
    check(g);
    MEGATRON_ASSERT(peer == 0, "recv from rank ", peer, " of a one-rank group");
    MEGATRON_CHECK(!queue_.empty(), "recv on a single process with no matching send: it would wait forever");
    MEGATRON_ASSERT(queue_.front().numel() == t.numel(), "recv of ", t.numel(), " elements, sent ",
                    queue_.front().numel());
    t.view({-1}).copy_(queue_.front().reshape({-1}));
    queue_.pop_front();
    return {};
  }
  Work barrier(const ProcessGroup& g) override {
    check(g);
    return {};
  }
  [[noreturn]] void abort(int exit_code) override {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    std::_Exit(exit_code);
  }

 private:
  static void check(const ProcessGroup& g) { MEGATRON_ASSERT(g.size() == 1, "group ", g.name(), " has ", g.size(), " ranks"); }

  std::shared_ptr<ProcessGroup> world_;
  std::deque<at::Tensor> queue_;
};

}  // namespace

ProcessGroup::ProcessGroup(std::string name, std::vector<int> ranks, int global_rank)
    : name_(std::move(name)), ranks_(std::move(ranks)) {
  rank_ = -1;
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    if (ranks_[i] == global_rank) rank_ = static_cast<int>(i);
  }
  MEGATRON_ASSERT(rank_ >= 0, "rank ", global_rank, " is not in the ", name_, " group it was given");
}

std::string ProcessGroup::describe() const {
  std::string out = "the " + name_ + " group (rank" + (ranks_.size() > 1 ? "s " : " ");
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    if (i > 0) out += ", ";
    if (i == 8 && ranks_.size() > 10) {
      out += "..., " + std::to_string(ranks_.back());
      break;
    }
    out += std::to_string(ranks_[i]);
  }
  return out + ")";
}

Work& Work::operator=(Work&& other) noexcept {
  if (this != &other) {
    if (impl_) {
      // Assigning over a pending operation would lose it: finish it first.
      try {
        impl_->wait();
      } catch (const std::exception& e) {
        abort_on_error(e);
      }
    }
    impl_ = std::move(other.impl_);
  }
  return *this;
}

Work::~Work() {
  if (!impl_) return;
  if (std::uncaught_exceptions() > 0) {
    impl_.reset();  // abandoned while an error unwinds: the error path ends the job
    return;
  }
  try {
    impl_->wait();
  } catch (const std::exception& e) {
    abort_on_error(e);  // a destructor cannot throw
  }
}

void Work::wait() {
  if (!impl_) return;
  std::unique_ptr<Impl> impl = std::move(impl_);
  impl->wait();
}

bool Work::test() {
  if (!impl_) return true;
  if (!impl_->test()) return false;
  impl_.reset();
  return true;
}

std::unique_ptr<Communicator> make_single_process_communicator() {
  return std::make_unique<SingleProcessCommunicator>();
}

std::unique_ptr<Communicator> make_communicator() {
  // Open MPI's mpirun, srun --mpi=pmix (PMIx), and MPICH-style launchers (PMI).
  const bool mpi_launcher = env_int("OMPI_COMM_WORLD_SIZE") >= 1 || std::getenv("PMIX_RANK") != nullptr ||
                            env_int("PMI_SIZE") >= 1;
  if (mpi_launcher) {
#if MEGATRON_HAVE_MPI
    return make_mpi_communicator();
#else
    MEGATRON_FAIL("this process was started by an MPI launcher, but this build has no MPI (Open MPI was not found "
                  "when it was configured); install libopenmpi-dev (scripts/setup.sh does) and rebuild");
#endif
  }
  const int slurm_tasks = env_int("SLURM_STEP_NUM_TASKS");
  MEGATRON_CHECK(slurm_tasks <= 1 || env_int("SLURM_PROCID") < 0, "srun started ", slurm_tasks,
                 " tasks without an MPI launch (no PMIx in this task's environment), so each would train alone; "
                 "run `srun --mpi=pmix ...` (see `srun --mpi=list`) or mpirun inside the allocation");
  const int world = env_int("WORLD_SIZE");
  MEGATRON_CHECK(world <= 1, "WORLD_SIZE=", world, " is set but no MPI launcher started this process; torchrun is "
                 "not supported: launch one process per GPU with `srun --mpi=pmix` or `mpirun -np ", world, "`");
  return make_single_process_communicator();
}

}  // namespace megatron::parallel
