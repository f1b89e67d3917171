// Every rank must run the same command line: ranks started with different flags would build
// models of different shapes (and crash inside the communication library) or train replicas that
// silently diverge. One all-gather of a hash of each rank's resolved arguments finds out at start;
// only when they differ are the configurations exchanged, to name the first differences and ranks.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "megatron/parallel/communicator.h"

namespace megatron::train {

// Where `mine` differs from `reference` (both to_json() objects of resolved Arguments), in the
// dump's field order and by flag: "--hidden-size 48 (rank 0: 64)". Values that differ between
// ranks by nature (rank, local rank) are not compared.
std::vector<std::string> argument_differences(const nlohmann::json& mine, const nlohmann::json& reference,
                                              int reference_rank);

// Throws megatron::Error on every rank, naming the ranks whose resolved arguments differ from rank
// 0's and the first differences, when any do. A collective over the world: every rank calls it.
void check_ranks_agree(const nlohmann::json& arguments, parallel::Communicator& comm);

}  // namespace megatron::train
