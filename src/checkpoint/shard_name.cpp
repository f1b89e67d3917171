// Checkpoint piece names (see shard_name.h).
#include "megatron/checkpoint/shard_name.h"

#include <cstdio>
#include <set>

#include "megatron/core/check.h"

namespace megatron::checkpoint {

std::string ShardName::str() const {
  char buf[48];
  if (pp == 1) {
    std::snprintf(buf, sizeof(buf), "mp_rank_%02d", index);
  } else {
    std::snprintf(buf, sizeof(buf), "mp_rank_%02d_%03d", index, pp_rank);
  }
  std::string name = buf;
  if (ep > 1) {
    std::snprintf(buf, sizeof(buf), "_%03d", ep_rank);
    name += buf;
  }
  return name;
}

ShardName ShardName::of(const parallel::ParallelState& ps) {
  return {ps.checkpoint_shard_index(), ps.pp_rank(), ps.pp(), ps.ep_rank(), ps.ep()};
}

std::vector<std::string> ShardName::all(const parallel::ParallelState& ps) {
  std::set<std::string> names;
  for (const auto& [index, pp_rank, ep_rank] : ps.checkpoint_shards_of_ranks()) {
    names.insert(ShardName{index, pp_rank, ps.pp(), ep_rank, ps.ep()}.str());
  }
  return {names.begin(), names.end()};
}

std::optional<ShardName::Numbers> ShardName::parse(std::string_view name) {
  const std::string text(name);
  Numbers n;
  int used = 0;
  if (std::sscanf(text.c_str(), "mp_rank_%2d%n", &n.index, &used) != 1 || used != 10) return std::nullopt;
  std::size_t at = 10;
  while (at < text.size() && n.more.size() < 2) {
    int value = 0;
    if (std::sscanf(text.c_str() + at, "_%3d%n", &value, &used) != 1 || used != 4) break;
    n.more.push_back(value);
    at += 4;
  }
  if (at != text.size()) return std::nullopt;
  return n;
}

std::string chunk_prefix(int chunk, int chunks) { return chunks > 1 ? "model" + std::to_string(chunk) + "." : ""; }

std::pair<int, std::string> split_chunk_prefix(const std::string& name, int chunks) {
  if (chunks <= 1) return {0, name};
  const auto dot = name.find('.');
  MEGATRON_CHECK(name.starts_with("model") && dot != std::string::npos && dot > 5,
                 "internal error: ", name, " has no model<c>. chunk prefix");
  return {std::stoi(name.substr(5, dot - 5)), name.substr(dot + 1)};
}

}  // namespace megatron::checkpoint
