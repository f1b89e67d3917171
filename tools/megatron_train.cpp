// megatron_train: pretrain_gpt.py's command line in C++. One process per rank (mpirun, srun
// --mpi=pmix, or a plain single process): parses Megatron's flags, prints Megatron's start-up
// output and runs the trainer. Errors go to stderr as one line each, with exit status 1 (a
// LibTorch error without its stack trace unless MEGATRON_BACKTRACE=1). With more than one rank,
// command-line errors (the same on every rank) are printed by rank 0 only; an error during the
// run is printed by the rank that met it, prefixed "[rank N]", and ends every rank of the job.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "megatron/core/allocator.h"
#include "megatron/core/check.h"
#include "megatron/core/file_io.h"
#include "megatron/core/tool_main.h"
#include "megatron/core/torch_errors.h"
#include "megatron/kernels/device.h"
#include "megatron/parallel/communicator.h"
#include "megatron/parallel/nccl_communicator.h"
#include "megatron/train/arguments.h"
#include "megatron/train/trainer.h"

namespace {

// Ranks on one node share its cores: each gets an equal part for its intra-op threads, unless
// OMP_NUM_THREADS says otherwise (as under torchrun).
void share_cores_among_local_ranks(const megatron::parallel::Communicator& comm) {
  const char* omp = std::getenv("OMP_NUM_THREADS");
  if ((omp != nullptr && *omp != '\0') || comm.local_size() <= 1) return;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(std::max(1, cores / comm.local_size()));
}

int train(const std::vector<std::string>& args) {
  megatron::install_temp_file_cleanup();
  std::unique_ptr<megatron::parallel::Communicator> comm = megatron::parallel::make_communicator();
  share_cores_among_local_ranks(*comm);
  const bool many = comm->world_size() > 1;
  megatron::train::ParseOptions options;
  options.world_size = comm->world_size();
  options.rank = comm->rank();
  options.local_rank_env = comm->local_rank();
  std::vector<std::string> messages;
  options.messages = &messages;
  megatron::train::Arguments parsed;
  try {
    parsed = megatron::train::parse_arguments(args, options);
  } catch (const megatron::Error& e) {
    // Every rank parsed the same command line and failed the same way: rank 0 speaks for all.
    if (comm->rank() == 0) throw;
    return 1;
  }
  try {
    // One process per GPU: CUDA tensors then travel over NCCL, the rest over the launcher's MPI.
    if (many && megatron::kernels::cuda_usable()) {
      comm = megatron::parallel::make_nccl_communicator(std::move(comm));
    }
    megatron::with_one_line_torch_errors([&] { megatron::train::run_training(parsed, *comm, messages, std::cout); });
  } catch (const std::exception& e) {
    if (!many) throw;
    // Communicator errors name their rank already.
    const std::string prefix = "[rank " + std::to_string(comm->rank()) + "] ";
    const std::string what = e.what();
    megatron::print_tool_error("megatron_train", what.starts_with(prefix) ? what : prefix + what);
    comm->abort(1);  // the other ranks may be waiting for this one in a collective
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  megatron::keep_freed_memory_for_reuse();
  // One hardware queue per GPU, as Megatron requires for sequence parallelism and its
  // communication overlap: kernels then start in the order they were issued. Set before any CUDA
  // call; a value the user exported wins.
  ::setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", /*overwrite=*/0);
  const std::vector<std::string> args(argv + 1, argv + argc);
  return megatron::run_torch_tool("megatron_train", [&] {
    if (!megatron::train::help_requested(args)) return train(args);
    std::cout << megatron::train::help_text();
    return 0;
  });
}
