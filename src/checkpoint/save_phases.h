// The phases of a checkpoint save (checkpoint.cpp), shared by save_checkpoint, which runs them
// back to back, and AsyncCheckpointSaver, which runs write_files on a thread of its own.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "megatron/checkpoint/checkpoint.h"
#include "megatron/checkpoint/dcp.h"
#include "megatron/core/file_io.h"

namespace megatron::checkpoint::detail {

struct SaveInProgress {
  std::string root;
  std::string final_dir;                  // <root>/iter_XXXXXXX
  std::string temp_dir;                   // <final_dir>.tmp.<rank 0's pid>
  std::unique_ptr<TemporaryFolder> temp;  // rank 0: removed unless committed
  std::int64_t iteration = 0;
  ShardWriter writer;
  bool leader = false;  // world rank 0: also writes the tokenizer files
  bool writes_optimizer = false;
  nlohmann::json meta;   // meta.json without "files"
  // Filled by write_files.
  nlohmann::json files = nlohmann::json::object();  // this rank's model/RNG digests
  FileDigest optimizer_digest;
  std::string error;  // this rank's failure, reported by commit_save on every rank
  int world_rank = 0;
  std::vector<DcpEntry> torch_dist_entries;  // a torch_dist save: the items this rank wrote
};

// Writes and fsyncs state.tokenizer_files into <iteration_dir>/tokenizer/ (nothing when there are none).
void write_tokenizer_files(const std::string& iteration_dir, const CheckpointState& state);
// meta.json's contents for `state` as `writer` saves it, without the "files" digests.
nlohmann::json meta_without_files(const CheckpointState& state, const ShardWriter& writer);
// Collective over the world: rank 0 creates the temporary folder; everyone learns its name.
SaveInProgress begin_save(const std::string& root, const CheckpointState& state, const ShardWriter& writer,
                          const parallel::ParallelContext& pc);
// Local (no communication, any thread): writes and fsyncs this rank's files; errors go into
// save.error.
void write_files(SaveInProgress& save, const CheckpointState& state) noexcept;
// Collective over `group`: every rank's `mine` (the same count on each), concatenated in rank order.
std::vector<std::int64_t> all_gather_values(const std::vector<std::int64_t>& mine, const parallel::ProcessGroup& group,
                                            parallel::Communicator& comm);
// Collective over the world, a torch_dist save's part of commit_save: every rank's items go to rank
// 0, which checks their files are in the folder as it sees it and writes the metadata and common
// state (write_torch_dist_common). Returns this rank's error ("" when none; rank 0's own, or the
// one it was given in save.error).
std::string commit_torch_dist_metadata(SaveInProgress& save, const parallel::ParallelContext& pc);
// Collective over the world: meta.json, the all-ranks-succeeded check, rank 0's rename and the
// tracker. Throws on every rank when any rank failed.
void commit_save(SaveInProgress& save, const parallel::ParallelContext& pc);

}  // namespace megatron::checkpoint::detail
