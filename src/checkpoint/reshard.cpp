// Loading a checkpoint saved in another tensor x pipeline layout (see reshard.h): every
// parameter this rank holds is found in the saved layout (which stage and chunk held its layer,
// under which stage-local name), its saved TP shards are joined into the full tensor and this
// rank's shard is cut from it; the optimizer's fp32 state (main parameters and both moments) is
// joined and cut the same way, from the pieces of every data-parallel rank's file.
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "megatron/checkpoint/reshard.h"

#include "megatron/optim/optimizer_state_piece.h"
#include "megatron/checkpoint/shard_name.h"
#include "megatron/core/check.h"
#include "megatron/parallel/parallel_state.h"

namespace megatron::checkpoint {
namespace {

using optim::kOptimizerStates;
using optim::optimizer_state_name;
using optim::OptimizerState;
using optim::OptimizerStatePiece;
using optim::parse_optimizer_state_piece;

constexpr const char* kLayers = "decoder.layers.";

using Where = StagePlace;  // name: as the saved stage names it

class Resharder {
 public:
  Resharder(const std::string& root, std::int64_t iteration, const ReshardSource& saved, const ReshardTarget& target,
            bool load_optimizer)
      : root_(root), iteration_(iteration), saved_(saved), target_(target), load_optimizer_(load_optimizer) {}

  CheckpointState run() {
    // Counters and config from the first shard's metadata (no tensors).
    CheckpointState out = load_checkpoint(root_, iteration_, folder_name(0, 0, 0), false, false, {}, false);
    // Where each parameter this rank holds was saved; the loads then read only those tensors'
    // optimizer state.
    std::vector<Where> wheres;
    for (const auto& [name, param] : target_.params) {
      wheres.push_back(locate(name));
      needed_[wheres.back().stage].insert(wheres.back().name);
    }
    NamedTensors pieces;
    for (std::size_t i = 0; i < target_.params.size(); ++i) {
      const auto& [name, param] = target_.params[i];
      const parallel::TensorParallelLayout& layout = target_.layouts[i];
      const Where& where = wheres[i];
      // Expert weights: every saved EP rank's block, each joined over the experts' TP, then this
      // rank's block; a dense parameter's TP shards.
      const bool expert = layout.expert_parallel;
      const int blocks = expert ? saved_.ep : 1, splits = expert ? saved_etp() : saved_.tp;
      std::vector<std::vector<at::Tensor>> shards(static_cast<std::size_t>(blocks));
      for (int e = 0; e < blocks; ++e) {
        for (int t = 0; t < splits; ++t) {
          const auto [index, ep_rank] = holders(where.stage, t, expert ? e : -1).front();
          shards[static_cast<std::size_t>(e)].push_back(
              find(shard(index, where.stage, ep_rank).model, where.name, index, where.stage, ep_rank));
        }
      }
      const at::Tensor full = join(shards, layout);
      const at::Tensor mine = cut(full, layout);
      MEGATRON_CHECK(mine.sizes() == param.sizes(), "cannot reshard ", where.name, " (", name, "): its saved full shape ",
                     full.sizes(), " does not fit this model's shard ", param.sizes(),
                     " (a different padded vocabulary? keep --make-vocab-size-divisible-by x TP the same)");
      out.model.emplace_back(name, mine);
      if (!load_optimizer_ || i + target_.buffers >= target_.params.size()) continue;
      for (const OptimizerState state : kOptimizerStates) {
        std::vector<std::vector<at::Tensor>> state_shards(static_cast<std::size_t>(blocks));
        for (int e = 0; e < blocks; ++e) {
          for (int t = 0; t < splits; ++t) {
            const at::Tensor& like = shards[static_cast<std::size_t>(e)][static_cast<std::size_t>(t)];
            state_shards[static_cast<std::size_t>(e)].push_back(
                assemble_state(where, state, t, expert ? e : -1, like));
          }
        }
        pieces.emplace_back(OptimizerStatePiece{name, state, 0}.name(),
                            cut(join(state_shards, layout), layout).reshape({-1}).contiguous());
      }
    }
    if (load_optimizer_) out.optimizer_parts.push_back(std::move(pieces));
    return out;
  }

 private:
  // The saved stage and name of a parameter this rank holds (its current name).
  Where locate(const std::string& name) {
    const std::string full = full_model_name(name, target_.layout, target_.pp_rank);
    const parallel::PipelineLayout& from = saved_.layout;
    // A tied output layer saved without pipelining is the word embedding itself.
    if (full == "output_layer.weight" && saved_.tied_embeddings && from.stages == 1) {
      return {0, chunk_prefix(0, from.chunks) + "embedding.word_embeddings.weight"};
    }
    return stage_place(full, from);
  }

  // Folder `index` of a stage and EP rank holds TP shard index % tp and expert-TP shard index % etp.
  std::string folder_name(int index, int stage, int ep_rank) const {
    return ShardName{index, stage, saved_.layout.stages, ep_rank, saved_.ep}.str();
  }

  const CheckpointState& shard(int index, int stage, int ep_rank) {
    const std::string folder = folder_name(index, stage, ep_rank);
    auto it = cache_.find(folder);
    if (it == cache_.end()) {
      // Of the optimizer files, only the state of the tensors this rank needs from that stage.
      const std::set<std::string>& needed = needed_[stage];
      const TensorFilter keep = [&needed](const std::string& name, std::int64_t) {
        const auto piece = parse_optimizer_state_piece(name);
        return piece && needed.contains(piece->param);
      };
      it = cache_.emplace(folder, load_checkpoint(root_, iteration_, folder, load_optimizer_, false, keep))
               .first;
    }
    return it->second;
  }

  at::Tensor find(const NamedTensors& tensors, const std::string& name, int index, int stage, int ep_rank) const {
    for (const auto& [n, t] : tensors) {
      if (n == name) return t;
    }
    MEGATRON_FAIL("checkpoint ", root_, " iteration ", iteration_, ": ", folder_name(index, stage, ep_rank),
                  " has no ", name);
  }

  int saved_etp() const { return saved_.etp > 0 ? saved_.etp : saved_.tp; }

  // The saved folders (index, EP rank) of `stage` holding a shard: TP shard `split` of the dense
  // parameters (ep_rank -1: every EP rank's folders), or expert-TP shard `split` of EP rank
  // `ep_rank`'s experts. Folder index T holds TP shard T % TP and expert-TP shard T % ETP; which
  // (T, EP rank) pairs were written follows from the saved rank grid (with TP 2, expert TP 1 and
  // EP 2 on two ranks only mp_rank_00_000 and mp_rank_01_001), so they are looked up.
  std::vector<std::pair<int, int>> holders(int stage, int split, int ep_rank) {
    std::vector<std::pair<int, int>> out;
    const int step = ep_rank < 0 ? saved_.tp : saved_etp(), folders = std::max(saved_.tp, saved_etp());
    for (int e = ep_rank < 0 ? 0 : ep_rank; e < (ep_rank < 0 ? saved_.ep : ep_rank + 1); ++e) {
      for (int t = split; t < folders; t += step) {
        const std::string folder = folder_name(t, stage, e);
        auto it = exists_.find(folder);
        if (it == exists_.end()) {
          const std::string path = iteration_folder(root_, iteration_) + "/" + folder;
          it = exists_.emplace(folder, std::filesystem::is_directory(path)).first;
        }
        if (it->second) out.emplace_back(t, e);
      }
    }
    MEGATRON_CHECK(!out.empty(), "checkpoint ", iteration_folder(root_, iteration_), " has no folder holding ",
                   ep_rank < 0 ? str_cat("tensor-parallel shard ", split)
                               : str_cat("expert-tensor-parallel shard ", split, " of expert-parallel rank ", ep_rank),
                   " of stage ", stage, ": it is partial");
    return out;
  }

  // One saved shard's fp32 `state` of a parameter, from the pieces of every DP rank's file in every
  // folder holding that shard (the distributed optimizer spreads the state of a dense shard over
  // every EP rank's folders, and where the experts' TP size is not TP over several folders).
  at::Tensor assemble_state(const Where& where, OptimizerState state, int split, int ep_rank, const at::Tensor& like) {
    at::Tensor flat = at::full({like.numel()}, std::numeric_limits<float>::quiet_NaN(), at::kFloat);
    std::int64_t covered = 0;
    std::map<std::int64_t, std::int64_t> seen;  // offset -> size (DP ranks of a plain optimizer repeat pieces)
    std::vector<const NamedTensors*> parts;
    const auto folders = holders(where.stage, split, ep_rank);
    for (const auto& [index, e] : folders) {
      for (const auto& part : shard(index, where.stage, e).optimizer_parts) parts.push_back(&part);
    }
    for (const NamedTensors* part : parts) {
      for (const auto& [n, data] : *part) {
        const auto piece = parse_optimizer_state_piece(n);
        if (!piece || piece->param != where.name || piece->state != state) continue;
        const std::int64_t offset = piece->offset;
        if (!seen.emplace(offset, data.numel()).second) continue;
        MEGATRON_CHECK(offset + data.numel() <= flat.numel(), "optimizer piece ", n, " runs past its parameter");
        flat.narrow(0, offset, data.numel()).copy_(data);
        covered += data.numel();
      }
    }
    MEGATRON_CHECK(covered == flat.numel(), "checkpoint ", root_, ": the optimizer state '", optimizer_state_name(state),
                   "' of ", where.name, " in ", folder_name(folders[0].first, where.stage, folders[0].second),
                   folders.size() > 1 ? " (and the other folders holding that shard)" : "", " covers ",
                   covered, " of ", flat.numel(), " elements");
    return flat.view(like.sizes());
  }

  // The full tensor from [EP block][TP shard] (one EP block for dense parameters).
  at::Tensor join(const std::vector<std::vector<at::Tensor>>& shards, const parallel::TensorParallelLayout& layout) const {
    std::vector<at::Tensor> blocks;
    for (const auto& tp_shards : shards) blocks.push_back(parallel::full_from_shards(tp_shards, layout));
    return blocks.size() == 1 ? blocks.front() : at::cat(blocks, 0);
  }
  // This rank's part of a full tensor: its block of the experts and their expert-TP shard for
  // expert weights, its TP shard otherwise.
  at::Tensor cut(const at::Tensor& full, const parallel::TensorParallelLayout& layout) const {
    if (!layout.expert_parallel) return parallel::shard_of_full(full, layout, target_.tp_rank, target_.tp);
    const bool own_tp = target_.etp > 0;
    return parallel::shard_of_full(parallel::expert_block(full, layout, target_.ep_rank, target_.ep), layout,
                                   own_tp ? target_.etp_rank : target_.tp_rank, own_tp ? target_.etp : target_.tp);
  }

  std::string root_;
  std::int64_t iteration_;
  ReshardSource saved_;
  const ReshardTarget& target_;
  bool load_optimizer_;
  std::map<std::string, CheckpointState> cache_;
  std::map<std::string, bool> exists_;  // saved folder name -> written
  std::map<int, std::set<std::string>> needed_;  // per saved stage: the saved names this rank reads
};

}  // namespace

std::string full_model_name(const std::string& name, const parallel::PipelineLayout& layout, int pp_rank) {
  auto [chunk, rest] = split_chunk_prefix(name, layout.chunks);
  if (!rest.starts_with(kLayers)) return rest;
  const auto dot = rest.find('.', std::string(kLayers).size());
  const int local = std::stoi(rest.substr(std::string(kLayers).size(), dot - std::string(kLayers).size()));
  return kLayers + std::to_string(layout.layers(pp_rank, chunk).first + local) + rest.substr(dot);
}

StagePlace stage_place(const std::string& full_name, const parallel::PipelineLayout& layout) {
  if (full_name.starts_with(kLayers)) {
    const auto dot = full_name.find('.', std::string(kLayers).size());
    const int global = std::stoi(full_name.substr(std::string(kLayers).size(), dot - std::string(kLayers).size()));
    for (int p = 0; p < layout.stages; ++p) {
      for (int c = 0; c < layout.chunks; ++c) {
        const auto range = layout.layers(p, c);
        if (global >= range.first && global < range.first + range.count) {
          return {p, chunk_prefix(c, layout.chunks) + kLayers + std::to_string(global - range.first) +
                         full_name.substr(dot)};
        }
      }
    }
    MEGATRON_FAIL("layer ", global, " is in no stage of the saved layout");
  }
  if (full_name.starts_with("embedding.")) return {0, chunk_prefix(0, layout.chunks) + full_name};
  return {layout.stages - 1, chunk_prefix(layout.chunks - 1, layout.chunks) + full_name};  // final norm, output
}

CheckpointState load_resharded(const std::string& root, std::int64_t iteration, const ReshardSource& saved,
                                           const ReshardTarget& target, bool load_optimizer) {
  return Resharder(root, iteration, saved, target, load_optimizer).run();
}

bool same_layer_split(const parallel::PipelineLayout& a, const parallel::PipelineLayout& b) {
  if (a.num_layers != b.num_layers || a.stages != b.stages || a.chunks != b.chunks) return false;
  for (int p = 0; p < a.stages; ++p) {
    for (int c = 0; c < a.chunks; ++c) {
      const auto x = a.layers(p, c), y = b.layers(p, c);
      if (x.first != y.first || x.count != y.count) return false;
    }
  }
  return true;
}

void load_parameters(const NamedTensors& params, const NamedTensors& saved,
                     const std::string& where) {
  std::map<std::string, const at::Tensor*> by_name;
  for (const auto& [name, t] : saved) by_name[name] = &t;
  std::vector<std::string> problems;
  std::vector<std::pair<const at::Tensor*, const at::Tensor*>> copies;  // (parameter, saved)
  for (const auto& [name, p] : params) {
    const auto it = by_name.find(name);
    if (it == by_name.end()) {
      problems.push_back(name + ": missing from the checkpoint");
      continue;
    }
    if (it->second->sizes() != p.sizes()) {
      problems.push_back(str_cat(name, ": checkpoint shape ", it->second->sizes(), ", model shape ", p.sizes()));
    }
    copies.emplace_back(&p, it->second);
    by_name.erase(it);
  }
  for (const auto& [name, t] : by_name) problems.push_back(name + ": in the checkpoint but not in this model");
  throw_if_problems("checkpoint " + where + " does not fit the model", problems, ProblemHeading::kList);
  at::NoGradGuard no_grad;
  for (const auto& [param, value] : copies) param->copy_(*value);
}

}  // namespace megatron::checkpoint
