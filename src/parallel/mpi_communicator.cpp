// Communicator over MPI on CPU tensors (see communicator.h). Every operation is MPI's non-blocking
// form (MPI_Iallreduce, MPI_Iallgather, MPI_Ireduce_scatter_block, MPI_Ibcast, MPI_Isend/Irecv,
// MPI_Ibarrier) on a communicator per process group (MPI_Comm_split of the world); waiting polls
// MPI_Test, yielding and then sleeping between polls, so oversubscribed ranks (8 on 2 cores) leave
// the cores to the ranks that compute, and gives up after the communicator's timeout with a
// message naming the rank, the group and the operation. fp16/bf16 reductions, which MPI has no
// type for, run on an fp32 copy. Errors from MPI are returned (MPI_ERRORS_RETURN) and thrown as
// megatron::Error with MPI's own message. Counts above INT_MAX elements are refused.
// The C API only: the deprecated C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <sched.h>

#include <ATen/ops/empty.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <thread>

#include "megatron/core/check.h"
#include "mpi_communicator.h"

namespace megatron::parallel {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail_mpi(int code, const char* call, const std::string& context) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = std::snprintf(text, sizeof(text), "code %d", code);
  MEGATRON_FAIL(context, ": ", call, " failed: ", std::string(text, static_cast<std::size_t>(length)));
}

#define MEGATRON_CHECK_MPI(call, context)                  \
  do {                                                     \
    const int megatron_mpi_code_ = (call);                 \
    if (megatron_mpi_code_ != MPI_SUCCESS) {               \
      fail_mpi(megatron_mpi_code_, #call, (context));      \
    }                                                      \
  } while (false)

std::string format_timeout(std::chrono::milliseconds t) {
  if (t.count() % 60000 == 0) {
    const auto minutes = t.count() / 60000;
    return str_cat(minutes, minutes == 1 ? " minute" : " minutes");
  }
  return str_cat(t.count() / 1000.0, " s");
}

// The MPI datatype of a tensor's elements for a transfer; reductions need a reducible one.
MPI_Datatype mpi_type(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kLong: return MPI_INT64_T;
    case at::kInt: return MPI_INT32_T;
    case at::kShort: return MPI_INT16_T;
    case at::kChar: return MPI_INT8_T;
    case at::kByte: return MPI_UINT8_T;
    case at::kBool: return MPI_C_BOOL;
    case at::kHalf:
    case at::kBFloat16: return MPI_UINT16_T;  // transfers only; reductions go through fp32
    default: MEGATRON_FAIL("the MPI communicator cannot transfer ", type, " tensors");
  }
}

bool reducible_by_mpi(at::ScalarType type) { return type != at::kHalf && type != at::kBFloat16; }

class MpiGroup final : public ProcessGroup {
 public:
  MpiGroup(std::string name, std::vector<int> ranks, int global_rank, MPI_Comm comm)
      : ProcessGroup(std::move(name), std::move(ranks), global_rank), comm_(comm) {}
  ~MpiGroup() override {
    if (comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_NULL) {
      int finalized = 1;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Comm_free(&comm_);
    }
  }
  MPI_Comm comm() const { return comm_; }

 private:
  MPI_Comm comm_;
};

// One pending MPI request; `finish` runs once it completed (copies out of staging buffers).
class MpiWork final : public Work::Impl {
 public:
  MpiWork(MPI_Request request, std::string what, int rank, std::chrono::milliseconds timeout,
          std::vector<at::Tensor> keep_alive, std::function<void()> finish)
      : request_(request),
        what_(std::move(what)),
        rank_(rank),
        timeout_(timeout),
        keep_alive_(std::move(keep_alive)),
        finish_(std::move(finish)) {}
  ~MpiWork() override {
    if (!done_ && request_ != MPI_REQUEST_NULL) {
      // Abandoned (its wait timed out, or an exception unwinds past it): MPI may still write into
      // the buffers, and a request cannot be cancelled portably, so they stay allocated for the
      // rest of the process, which the error path ends with MPI_Abort.
      static auto* abandoned = new std::vector<std::pair<std::vector<at::Tensor>, std::function<void()>>>();
      abandoned->emplace_back(std::move(keep_alive_), std::move(finish_));
    }
  }

  bool test() override {
    if (done_) return true;
    int flag = 0;
    MEGATRON_CHECK_MPI(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE), str_cat("rank ", rank_, ": ", what_));
    if (flag) {
      done_ = true;
      if (finish_) finish_();
      keep_alive_.clear();
    }
    return done_;
  }

  void wait() override {
    const auto start = Clock::now();
    auto pause = std::chrono::microseconds(10);
    for (int polls = 0; !test(); ++polls) {
      if (polls < 64) {
        sched_yield();
        continue;
      }
      const auto elapsed = Clock::now() - start;
      MEGATRON_CHECK(elapsed < timeout_, "[rank ", rank_, "] ", what_, " did not complete within ",
                     format_timeout(timeout_), " (--distributed-timeout-minutes): a rank of that group has died, "
                     "hangs, or runs a different operation");
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(500));
    }
  }

 private:
  MPI_Request request_;
  bool done_ = false;
  std::string what_;
  int rank_;
  std::chrono::milliseconds timeout_;
  std::vector<at::Tensor> keep_alive_;
  std::function<void()> finish_;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      MEGATRON_CHECK_MPI(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "starting MPI");
      owns_mpi_ = true;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    std::vector<int> all(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) all[static_cast<std::size_t>(r)] = r;
    world_ = std::make_shared<MpiGroup>("world", std::move(all), rank_, MPI_COMM_WORLD);
    // The ranks on this node, from MPI itself (every launcher); the launchers' variables, when
    // set, name the local rank as the launcher sees it.
    MPI_Comm node = MPI_COMM_NULL;
    MEGATRON_CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
                       "finding the ranks on this node");
    MPI_Comm_rank(node, &local_rank_);
    MPI_Comm_size(node, &local_size_);
    MPI_Comm_free(&node);
    for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK"}) {
      const char* value = std::getenv(name);
      if (value != nullptr && *value != '\0') {
        local_rank_ = std::atoi(value);
        break;
      }
    }
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    std::string text(version, static_cast<std::size_t>(length));
    text = text.substr(0, text.find_first_of(",\n"));
    backend_ = "MPI (" + text + ")";
  }

  ~MpiCommunicator() override {
    world_.reset();
    if (!owns_mpi_) return;
    // A polled barrier first: ranks that finish early do not spin inside MPI_Finalize while the
    // others still work (oversubscribed runs), and a rank that never arrives ends the job.
    try {
      MPI_Request request = MPI_REQUEST_NULL;
      if (MPI_Ibarrier(MPI_COMM_WORLD, &request) == MPI_SUCCESS) {
        MpiWork(request, "the barrier before MPI_Finalize", rank_, timeout(), {}, {}).wait();
      }
    } catch (const std::exception& e) {
      report_error(e);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  std::string backend() const override { return backend_; }

  std::shared_ptr<ProcessGroup> new_group(const std::string& name, const RankGroups& groups) override {
    int color = -1, key = 0;
    std::vector<int> mine;
    std::vector<int> seen(static_cast<std::size_t>(size_), 0);
    for (std::size_t g = 0; g < groups.size(); ++g) {
      for (std::size_t i = 0; i < groups[g].size(); ++i) {
        const int r = groups[g][i];
        MEGATRON_ASSERT(r >= 0 && r < size_ && !seen[static_cast<std::size_t>(r)]++, "group list ", name,
                        " names rank ", r, " twice or outside the world of ", size_);
        if (r == rank_) {
          color = static_cast<int>(g);
          key = static_cast<int>(i);
          mine = groups[g];
        }
      }
    }
    MEGATRON_ASSERT(color >= 0, "group list ", name, " does not hold rank ", rank_);
    // MPI_Comm_split blocks without a time limit: meet in a polled barrier first, so that a rank
    // that never arrives ends the job after the timeout instead of hanging it.
    MPI_Request arrived = MPI_REQUEST_NULL;
    MEGATRON_CHECK_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &arrived), str_cat("rank ", rank_, ": making the ", name, " groups"));
    MpiWork(arrived, str_cat("making the ", name, " groups on ", world_->describe()), rank_, timeout(), {}, {}).wait();
    MPI_Comm comm = MPI_COMM_NULL;
    MEGATRON_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, color, key, &comm),
                       str_cat("rank ", rank_, ": making the ", name, " groups"));
    return std::make_shared<MpiGroup>(name, std::move(mine), rank_, comm);
  }

  std::shared_ptr<ProcessGroup> world() override { return world_; }

  Work all_reduce(at::Tensor& t, ReduceOp op, const ProcessGroup& g) override {
    const MPI_Comm comm = check(t, g, "all_reduce");
    MEGATRON_ASSERT(t.scalar_type() != at::kBool, "all_reduce of a bool tensor on ", g.describe(),
                    ": reduce a numeric type");
    const MPI_Op mpi_op = op == ReduceOp::kSum ? MPI_SUM : MPI_MAX;
    if (!reducible_by_mpi(t.scalar_type())) {
      at::Tensor staged = t.to(at::kFloat);
      MPI_Request request = MPI_REQUEST_NULL;
      MEGATRON_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, staged.data_ptr(), count(staged), MPI_FLOAT, mpi_op, comm, &request),
                         describe("all_reduce", g));
      at::Tensor target = t;
      return make_work(request, "all_reduce", g, {staged, t}, [target, staged]() mutable { target.copy_(staged); });
    }
    MPI_Request request = MPI_REQUEST_NULL;
    MEGATRON_CHECK_MPI(
        MPI_Iallreduce(MPI_IN_PLACE, t.data_ptr(), count(t), mpi_type(t.scalar_type()), mpi_op, comm, &request),
        describe("all_reduce", g));
    return make_work(request, "all_reduce", g, {t}, {});
  }

  Work all_gather(at::Tensor& output, const at::Tensor& input, const ProcessGroup& g) override {
    const MPI_Comm comm = check(output, g, "all_gather");
    check(input, g, "all_gather");
    MEGATRON_ASSERT(output.scalar_type() == input.scalar_type() && output.numel() == input.numel() * g.size(),
                    "all_gather of ", input.numel(), " ", input.scalar_type(), " elements per rank into ",
                    output.numel(), " ", output.scalar_type(), " elements over ", g.describe());
    const MPI_Datatype type = mpi_type(input.scalar_type());
    MPI_Request request = MPI_REQUEST_NULL;
    MEGATRON_CHECK_MPI(MPI_Iallgather(input.data_ptr(), count(input), type, output.data_ptr(), count(input), type,
                                      comm, &request),
                       describe("all_gather", g));
    return make_work(request, "all_gather", g, {output, input}, {});
  }

  Work reduce_scatter(at::Tensor& output, const at::Tensor& input, const ProcessGroup& g) override {
    const MPI_Comm comm = check(output, g, "reduce_scatter");
    check(input, g, "reduce_scatter");
    MEGATRON_ASSERT(output.scalar_type() == input.scalar_type() && input.numel() == output.numel() * g.size(),
                    "reduce_scatter of ", input.numel(), " ", input.scalar_type(), " elements into ", output.numel(),
                    " ", output.scalar_type(), " per rank over ", g.describe());
    MPI_Request request = MPI_REQUEST_NULL;
    if (!reducible_by_mpi(input.scalar_type())) {
      const at::Tensor staged_in = input.to(at::kFloat);
      at::Tensor staged_out = at::empty(output.sizes(), output.options().dtype(at::kFloat));
      MEGATRON_CHECK_MPI(MPI_Ireduce_scatter_block(staged_in.data_ptr(), staged_out.data_ptr(), count(staged_out),
                                                   MPI_FLOAT, MPI_SUM, comm, &request),
                         describe("reduce_scatter", g));
      at::Tensor target = output;
      return make_work(request, "reduce_scatter", g, {staged_in, staged_out, output},
                       [target, staged_out]() mutable { target.copy_(staged_out); });
    }
    MEGATRON_CHECK_MPI(MPI_Ireduce_scatter_block(input.data_ptr(), output.data_ptr(), count(output),
                                                 mpi_type(input.scalar_type()), MPI_SUM, comm, &request),
                       describe("reduce_scatter", g));
    return make_work(request, "reduce_scatter", g, {output, input}, {});
  }

  Work broadcast(at::Tensor& t, int root, const ProcessGroup& g) override {
    const MPI_Comm comm = check(t, g, "broadcast");
    MEGATRON_ASSERT(root >= 0 && root < g.size(), "broadcast from rank ", root, " of ", g.describe());
    MPI_Request request = MPI_REQUEST_NULL;
    MEGATRON_CHECK_MPI(MPI_Ibcast(t.data_ptr(), count(t), mpi_type(t.scalar_type()), root, comm, &request),
                       describe("broadcast", g));
    return make_work(request, "broadcast", g, {t}, {});
  }

  Work send(const at::Tensor& t, int peer, const ProcessGroup& g, int tag) override {
    const MPI_Comm comm = check(t, g, "send");
    MEGATRON_ASSERT(peer >= 0 && peer < g.size(), "send to rank ", peer, " of ", g.describe());
    MPI_Request request = MPI_REQUEST_NULL;
    MEGATRON_CHECK_MPI(MPI_Isend(t.data_ptr(), count(t), mpi_type(t.scalar_type()), peer, check_tag(tag), comm, &request),
                       describe("send", g));
    return make_work(request, str_cat("send to rank ", g.ranks()[static_cast<std::size_t>(peer)]), g, {t}, {});
  }

  Work recv(at::Tensor& t, int peer, const ProcessGroup& g, int tag) override {
    const MPI_Comm comm = check(t, g, "recv");
    MEGATRON_ASSERT(peer >= 0 && peer < g.size(), "recv from rank ", peer, " of ", g.describe());
    MPI_Request request = MPI_REQUEST_NULL;
    MEGATRON_CHECK_MPI(
        MPI_Irecv(t.data_ptr(), count(t), mpi_type(t.scalar_type()), peer, check_tag(tag), comm, &request), describe("recv", g));
    return make_work(request, str_cat("recv from rank ", g.ranks()[static_cast<std::size_t>(peer)]), g, {t}, {});
  }

  Work barrier(const ProcessGroup& g) override {
    const MPI_Comm comm = group_comm(g);
    MPI_Request request = MPI_REQUEST_NULL;
    MEGATRON_CHECK_MPI(MPI_Ibarrier(comm, &request), describe("barrier", g));
    return make_work(request, "barrier", g, {}, {});
  }

  [[noreturn]] void abort(int exit_code) override {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);  // MPI_Abort does not return; this is for the compiler
  }

 private:
  MPI_Comm group_comm(const ProcessGroup& g) const {
    const auto* group = dynamic_cast<const MpiGroup*>(&g);
    MEGATRON_ASSERT(group != nullptr, "the ", g.name(), " group was not made by this MPI communicator");
    return group->comm();
  }

  MPI_Comm check(const at::Tensor& t, const ProcessGroup& g, const char* op) const {
    MEGATRON_CHECK(t.defined() && t.device().is_cpu(), "[rank ", rank_, "] ", op, " on ", g.describe(),
                   ": the MPI communicator works on CPU tensors, got one on ", t.defined() ? t.device().str() : "none",
                   " (GPU runs communicate through NCCL)");
    MEGATRON_ASSERT(t.is_contiguous(), op, " on ", g.describe(), " needs a contiguous tensor");
    return group_comm(g);
  }

  static int check_tag(int tag) {
    MEGATRON_ASSERT(tag >= 0 && tag <= 32767, "point-to-point tag ", tag, " outside MPI's guaranteed range 0-32767");
    return tag;
  }

  static int count(const at::Tensor& t) {
    MEGATRON_CHECK(t.numel() <= INT_MAX, "a tensor of ", t.numel(), " elements is too large for one MPI operation");
    return static_cast<int>(t.numel());
  }

  std::string describe(const char* op, const ProcessGroup& g) const {
    return str_cat("rank ", rank_, ": ", op, " on ", g.describe());
  }

  Work make_work(MPI_Request request, const std::string& op, const ProcessGroup& g, std::vector<at::Tensor> keep_alive,
                 std::function<void()> finish) const {
    return Work(std::make_unique<MpiWork>(request, str_cat(op, " on ", g.describe()), rank_, timeout(),
                                          std::move(keep_alive), std::move(finish)));
  }

  bool owns_mpi_ = false;
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  std::string backend_;
  std::shared_ptr<MpiGroup> world_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator() { return std::make_unique<MpiCommunicator>(); }

}  // namespace megatron::parallel
