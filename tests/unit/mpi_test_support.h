// Shared by the multi-rank test binaries (megatron_add_mpi_gtest, main in mpi_test_main.cpp):
// every rank runs every test; the communicator of the world is made once before the first test.
// Without a launcher the world is one process and the tests that need ranks skip themselves.
#pragma once

#include "megatron/parallel/communicator.h"

namespace megatron::testing {

// The world: MPI under mpirun, else the single-process communicator. Collectives in a test must
// be called by every rank in the same order (no early return on one rank only: ASSERT_* in a
// helper that communicates would leave the others waiting until the test timeout).
parallel::Communicator& world();

}  // namespace megatron::testing
