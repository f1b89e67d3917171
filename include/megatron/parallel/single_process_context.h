// A ParallelContext for code that runs in one process without a launcher (tests, tools): world
// size 1, every process group of one rank, over the single-process communicator. Made on first
// use and alive until the process exits; tensor-parallel regions are identities under it.
#pragma once

#include "megatron/parallel/parallel_context.h"

namespace megatron::parallel {

const ParallelContext& single_process_context();

}  // namespace megatron::parallel
