// Internal: the MPI implementation of Communicator (mpi_communicator.cpp), made by
// make_communicator() when a launcher started the process.
#pragma once

#include <memory>

#include "megatron/parallel/communicator.h"

namespace megatron::parallel {

// Initialises MPI (once per process) and returns the world communicator; MPI is finalised when it
// is destroyed.
std::unique_ptr<Communicator> make_mpi_communicator();

}  // namespace megatron::parallel
