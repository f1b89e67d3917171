// The rendezvous of the NCCL communicator: a c10d TCPStore (PyTorch's key-value store, which
// ProcessGroupNCCL uses to exchange its ncclUniqueIds) served by world rank 0 and reached by every
// rank. The address travels over the bootstrap communicator (MPI under srun / mpirun), so no
// MASTER_ADDR / MASTER_PORT is needed; when they are set they are used (the host, and the port
// instead of one the system picks).
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <string>

#include "megatron/parallel/communicator.h"

namespace c10d {
class Store;
}  // namespace c10d

namespace megatron::parallel {

struct StoreAddress {
  std::string host;
  int port = 0;
};

// Collective over `bootstrap`'s world: rank 0 starts the store's server, broadcasts its address,
// every rank connects. Throws megatron::Error naming the address when a rank cannot reach it
// within `timeout`.
c10::intrusive_ptr<c10d::Store> make_world_store(Communicator& bootstrap, std::chrono::milliseconds timeout,
                                                 StoreAddress* address = nullptr);

}  // namespace megatron::parallel
