// The names a checkpoint gives its pieces, formatted and parsed in this one place: Megatron's
// shard folders mp_rank_TT[_PPP][_EEE] (TT the checkpoint shard index, PPP the pipeline stage when
// there are several, EEE the expert-parallel rank when there are several), and the "model<c>."
// prefix of a parameter's name in a stage holding several virtual-pipeline chunks.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "megatron/parallel/parallel_state.h"

namespace megatron::checkpoint {

struct ShardName {
  // The checkpoint shard index: the TP rank, or where the experts are split finer than the dense
  // layers (expert TP > TP) the expert TP rank, so that the folders hold every dense and every
  // expert shard (this build's rule: Megatron writes such layouts only in its distributed format).
  int index = 0;
  int pp_rank = 0;
  int pp = 1;
  int ep_rank = 0;
  int ep = 1;

  // "mp_rank_01", "mp_rank_01_002", "mp_rank_00_001_003".
  std::string str() const;
  // This rank's folder, and the folders of the whole world (sorted): which (shard index, EP rank)
  // pairs occur depends on the grid (TP 2 with expert TP 1 and EP 2 on two ranks: mp_rank_00_000
  // and mp_rank_01_001).
  static ShardName of(const parallel::ParallelState& ps);
  static std::vector<std::string> all(const parallel::ParallelState& ps);

  // A folder name's numbers: TT, then up to two 3-digit numbers (the stage and/or the EP rank;
  // which one a single number is, the layout's sizes say). nullopt for any other name.
  struct Numbers {
    int index = 0;
    std::vector<int> more;
  };
  static std::optional<Numbers> parse(std::string_view name);
};

// "model<c>." when a stage holds several chunks, "" with one.
std::string chunk_prefix(int chunk, int chunks);
// A stage's parameter name without its chunk prefix, and the chunk (0 with one chunk).
std::pair<int, std::string> split_chunk_prefix(const std::string& name, int chunks);

}  // namespace megatron::checkpoint
