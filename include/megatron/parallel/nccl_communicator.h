// The GPU communicator: CUDA tensors go over NCCL, through PyTorch's own c10d ProcessGroupNCCL
// (one per process group, created over a TCPStore rendezvous, c10d_store.h); everything else (CPU
// tensors: checkpoint digests, loss sums, barriers) goes over the bootstrap communicator (MPI).
//
// Why c10d and not our own ncclComm_t: the hard parts of an NCCL communicator are not the calls
// but the ordering and the memory: collectives on their own streams ordered by events against the
// computing stream, the caching allocator told that a buffer is in use on another stream
// (recordStream) so that it is not reused too early, communicators created lazily per device
// set, a watchdog that notices a hung collective and aborts, and the same for send/recv pairs.
// ProcessGroupNCCL does all of this and runs every day under PyTorch's own distributed training;
// this project is developed mostly without GPUs, so code we could not run would carry the risk
// where it matters most. The adapter here only maps our operations onto c10d's and its Work onto
// ours; Work::wait() makes the current stream wait for the collective (as c10d's wait() does),
// it does not block the host.
#pragma once

#include <memory>

#include "megatron/parallel/communicator.h"

namespace megatron::parallel {

// Whether this build links PyTorch's NCCL back end (a build with the CUDA LibTorch).
bool nccl_available();

// Collective over `bootstrap`'s world. Throws megatron::Error in builds without NCCL.
std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> bootstrap);

}  // namespace megatron::parallel
