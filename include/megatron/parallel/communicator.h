// The one way ranks talk to each other: collectives and point-to-point transfers over process
// groups made from ParallelState's rank lists. Implementations: MPI on CPU tensors (this file's
// make_communicator under mpirun / srun --mpi=pmix), a single-process one (world size 1, every
// group of size 1, no library needed) and, with the GPU build, NCCL on CUDA tensors. Model and
// optimizer code never see which one runs.
//
// Every operation is asynchronous and returns a Work to wait on; a blocking call is
// `comm.all_reduce(t, ReduceOp::kSum, group).wait()`. Waiting polls with a short sleep instead of
// spinning (8 ranks on 2 cores stay responsive) and gives up after the communicator's timeout
// (--distributed-timeout-minutes): wait() then throws megatron::Error naming this rank, the group
// and the operation. Tensors must be contiguous and stay alive until the Work completes.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace megatron::parallel {

using RankGroups = std::vector<std::vector<int>>;

enum class ReduceOp { kSum, kMax };

// A set of global ranks that communicate together; position in ranks() = rank in the group.
class ProcessGroup {
 public:
  ProcessGroup(std::string name, std::vector<int> ranks, int global_rank);
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  const std::string& name() const { return name_; }  // "tensor-model-parallel", for messages
  const std::vector<int>& ranks() const { return ranks_; }
  int rank() const { return rank_; }  // this process's position in ranks()
  int size() const { return static_cast<int>(ranks_.size()); }
  // "the tensor-model-parallel group (ranks 0, 1)", for messages.
  std::string describe() const;

 private:
  std::string name_;
  std::vector<int> ranks_;
  int rank_ = 0;
};

// A pending operation. wait() blocks until it completes (throws on timeout or failure); a Work
// that was never waited on is waited on by its destructor (errors there end the process), except
// while an exception unwinds: then, as after a failed wait, the operation is abandoned and its
// buffers stay allocated for the rest of the process (MPI may still write into them); the error
// path is expected to end the job (Communicator::abort).
class Work {
 public:
  class Impl {
   public:
    virtual ~Impl() = default;
    virtual bool test() = 0;  // drives progress; true once complete
    virtual void wait() = 0;
  };
  Work() = default;  // already complete
  explicit Work(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
  Work(Work&&) noexcept = default;
  Work& operator=(Work&& other) noexcept;
  ~Work();

  void wait();
  bool test();
  bool pending() const { return impl_ != nullptr; }

 private:
  std::unique_ptr<Impl> impl_;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // The rank on its node: OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, LOCAL_RANK, else MPI's
  // shared-memory split.
  virtual int local_rank() const = 0;
  // The number of ranks on this node (MPI's shared-memory split).
  virtual int local_size() const = 0;
  // "MPI (Open MPI 4.1.4)", "single process": for the start-up log.
  virtual std::string backend() const = 0;
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }

  // Collective over the whole world: every rank passes the same list of disjoint groups covering
  // the world (e.g. ParallelState's RankGenerator groups for "tp"); returns the group holding
  // this rank. Call in the same order on every rank.
  virtual std::shared_ptr<ProcessGroup> new_group(const std::string& name, const RankGroups& groups) = 0;
  // The group of every rank.
  virtual std::shared_ptr<ProcessGroup> world() = 0;

  // In place: each rank's `t` becomes the reduction over the group.
  [[nodiscard]] virtual Work all_reduce(at::Tensor& t, ReduceOp op, const ProcessGroup& g) = 0;
  // output (g.size() * input.numel() elements) = every rank's input concatenated in group order.
  [[nodiscard]] virtual Work all_gather(at::Tensor& output, const at::Tensor& input, const ProcessGroup& g) = 0;
  // output (input.numel() / g.size() elements) = this rank's block of the sum of all inputs.
  [[nodiscard]] virtual Work reduce_scatter(at::Tensor& output, const at::Tensor& input, const ProcessGroup& g) = 0;
  // Every rank's `t` becomes the group rank `root`'s.
  [[nodiscard]] virtual Work broadcast(at::Tensor& t, int root, const ProcessGroup& g) = 0;
  // Point to point with group rank `peer`; matched by tag (0 to 32767), in issue order per pair
  // and tag.
  [[nodiscard]] virtual Work send(const at::Tensor& t, int peer, const ProcessGroup& g, int tag = 0) = 0;
  [[nodiscard]] virtual Work recv(at::Tensor& t, int peer, const ProcessGroup& g, int tag = 0) = 0;
  [[nodiscard]] virtual Work barrier(const ProcessGroup& g) = 0;

  // Ends every rank of the job (MPI_Abort) after this rank printed its error. Never returns.
  [[noreturn]] virtual void abort(int exit_code) = 0;

 private:
  std::chrono::milliseconds timeout_{std::chrono::minutes(10)};
};

// The communicator for this process: MPI when a launcher started it (mpirun: OMPI_COMM_WORLD_SIZE;
// srun --mpi=pmix: PMIX_RANK), the single-process one otherwise. Throws when the launcher and MPI
// disagree (srun started N > 1 tasks without PMIx: each would train alone) or WORLD_SIZE > 1 is
// set without an MPI launcher (torchrun is not supported).
std::unique_ptr<Communicator> make_communicator();

// World size 1: every group has one rank, collectives copy or do nothing.
std::unique_ptr<Communicator> make_single_process_communicator();

}  // namespace megatron::parallel
