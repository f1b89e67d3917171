// Reading checkpoints: the saved iterations, the tracker, the layout of a saved iteration and one
// shard folder's state, every file checked against its recorded size and CRC-32 (see checkpoint.h).
#include <algorithm>
#include <cctype>
#include <filesystem>

#include "checkpoint_files.h"
#include "megatron/checkpoint/checkpoint.h"
#include "megatron/checkpoint/torch_dist.h"
#include "megatron/checkpoint/shard_name.h"
#include "megatron/core/check.h"
#include "megatron/core/file_io.h"

namespace megatron::checkpoint {

namespace fs = std::filesystem;
using namespace detail;  // the file names and checks

namespace detail {

void check_digest(const std::string& path, const FileDigest& d, const nlohmann::json& expected) {
  const auto size = expected.at("size").get<std::uint64_t>();
  MEGATRON_CHECK(d.size == size, "checkpoint file ", path, " has ", d.size, " bytes, ", size,
                 " were written: the checkpoint is truncated or corrupt");
  MEGATRON_CHECK(d.crc32 == expected.at("crc32").get<std::uint32_t>(), "checkpoint file ", path,
                 " fails its CRC-32 check: the checkpoint is corrupt");
}

void verify(const std::string& path, const nlohmann::json& expected) {
  MEGATRON_CHECK(fs::exists(path), "checkpoint file ", path, " is missing: the checkpoint is partial");
  check_digest(path, digest_file(path), expected);
}

}  // namespace detail

std::vector<std::int64_t> saved_iterations(const std::string& root) {
  std::vector<std::int64_t> iterations;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!it->is_directory() || !is_checkpoint_output(name) || !name.starts_with("iter_")) continue;
    iterations.push_back(std::stoll(name.substr(5)));
  }
  std::sort(iterations.begin(), iterations.end());
  return iterations;
}

std::string describe_iterations(const std::vector<std::int64_t>& iterations) {
  std::string text;
  for (std::size_t i = 0; i < iterations.size(); ++i) {
    if (i == 6 && iterations.size() > 8) {
      text += str_cat(", ... (", iterations.size() - 7, " more)");
      i = iterations.size() - 1;
    }
    text += str_cat(i ? ", " : "", iterations[i]);
  }
  return text;
}

std::optional<std::int64_t> read_tracker(const std::string& root) {
  const std::string path = (fs::path(root) / kTrackerFile).string();
  if (!fs::exists(path)) return std::nullopt;
  const std::string text = read_text_file(path, "checkpoint tracker");
  std::size_t used = 0;
  long long value = -1;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  while (used < text.size() && std::isspace(static_cast<unsigned char>(text[used]))) ++used;
  MEGATRON_CHECK(used > 0 && used == text.size() && value >= 0, path, ": expected an iteration number, found '",
                 text.substr(0, 40), "'", text == "release" ? " (release checkpoints are not supported yet)" : "");
  return value;
}

SavedLayout read_layout(const std::string& root, std::int64_t iteration) {
  const std::string folder = iteration_folder(root, iteration);
  MEGATRON_CHECK(fs::is_directory(folder), "the checkpoint tracker ", (fs::path(root) / kTrackerFile).string(),
                 " names iteration ", iteration, " but ", fs::path(folder).filename().string(),
                 "/ does not exist in ", root, "; restore that folder, or correct or remove the tracker");
  if (is_torch_dist(folder)) return read_torch_dist_run(root, iteration).layout;
  // mp_rank_TT, then up to two 3-digit numbers: the pipeline stage and the expert-parallel rank
  // (which one a single number is, the first shard's meta.json says).
  std::vector<ShardName::Numbers> names;
  std::string first;
  for (const auto& entry : fs::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    const auto numbers = ShardName::parse(name);
    if (!numbers) continue;
    names.push_back(*numbers);
    if (first.empty() || name < first) first = name;
  }
  int max_tp = -1;
  for (const ShardName::Numbers& n : names) max_tp = std::max(max_tp, n.index);
  MEGATRON_CHECK(max_tp >= 0, "checkpoint ", folder, " has no mp_rank_* shard folders: it is partial or not a checkpoint");
  SavedLayout layout;
  layout.tp = max_tp + 1;
  const std::string meta_path = (fs::path(folder) / first / kMetaFile).string();
  MEGATRON_CHECK(fs::exists(meta_path), "checkpoint ", (fs::path(folder) / first).string(), " has no ", kMetaFile,
                 ": it is partial or not a megatron-cpp checkpoint");
  try {
    const auto meta = nlohmann::json::parse(read_text_file(meta_path, "checkpoint metadata"));
    layout.dp = meta.value("data_parallel_size", 1);
    layout.ep = meta.value("expert_model_parallel_size", 1);
    // Recorded since the experts could have a TP size of their own; the folders' count before.
    layout.tp = meta.value("tensor_model_parallel_size", layout.tp);
    layout.etp = meta.value("expert_tensor_parallel_size", layout.tp);
    layout.distributed_optimizer = meta.value("distributed_optimizer", false);
    if (meta.contains("config")) layout.config = meta.at("config");
  } catch (const nlohmann::json::exception& e) {
    MEGATRON_FAIL(meta_path, ": corrupt checkpoint metadata (", e.what(), ")");
  }
  int max_pp = 0, max_ep = 0;
  for (const ShardName::Numbers& n : names) {
    const bool has_ep = layout.ep > 1 && !n.more.empty();
    if (has_ep) max_ep = std::max(max_ep, n.more.back());
    if (n.more.size() > (has_ep ? 1u : 0u)) max_pp = std::max(max_pp, n.more.front());
  }
  layout.pp = max_pp + 1;
  MEGATRON_CHECK(layout.tp > 0 && layout.etp > 0 && std::max(layout.tp, layout.etp) == max_tp + 1, "checkpoint ",
                 folder, " records tensor-parallel size ", layout.tp, " and expert tensor-parallel size ", layout.etp,
                 " but its mp_rank_TT folders go up to TT = ", max_tp, " (expected ",
                 std::max(layout.tp, layout.etp) - 1, "): it is partial or corrupt");
  MEGATRON_CHECK(layout.ep == 1 || max_ep + 1 == layout.ep, "checkpoint ", folder, " records expert-parallel size ",
                 layout.ep, " but has shard folders of ", max_ep + 1, " expert-parallel ranks: it is partial");
  return layout;
}

CheckpointState load_checkpoint(const std::string& root, std::int64_t iteration, const std::string& shard,
                                bool load_optimizer, bool load_rng, const TensorFilter& optimizer_filter,
                                bool load_model) {
  const std::string folder = iteration_folder(root, iteration);
  MEGATRON_CHECK(fs::is_directory(folder), "the checkpoint tracker ", (fs::path(root) / kTrackerFile).string(),
                 " names iteration ", iteration, " but ", fs::path(folder).filename().string(),
                 "/ does not exist in ", root, "; restore that folder, or correct or remove the tracker");
  const fs::path dir = fs::path(folder) / shard;
  const std::string meta_path = (dir / kMetaFile).string();
  MEGATRON_CHECK(fs::exists(meta_path), "checkpoint ", dir.string(), " has no ", kMetaFile,
                 ": it is partial or not a megatron-cpp checkpoint (the tracker names iteration ", iteration, ")");
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(read_text_file(meta_path, "checkpoint metadata"));
  } catch (const nlohmann::json::exception& e) {
    MEGATRON_FAIL(meta_path, ": corrupt checkpoint metadata (", e.what(), ")");
  }
  MEGATRON_CHECK(meta.value("format", "") == "megatron-cpp", meta_path, ": not a megatron-cpp checkpoint");
  MEGATRON_CHECK(meta.value("format_version", 0) == kFormatVersion, meta_path, ": checkpoint format version ",
                 meta.value("format_version", 0), " is not supported (this build reads ", kFormatVersion, ")");
  CheckpointState state;
  try {
    state.iteration = meta.at("iteration").get<std::int64_t>();
    state.consumed_train_samples = meta.at("consumed_train_samples").get<std::int64_t>();
    state.consumed_valid_samples = meta.at("consumed_valid_samples").get<std::int64_t>();
    state.scheduler_num_steps = meta.at("scheduler_num_steps").get<std::int64_t>();
    state.optimizer_steps = meta.at("optimizer_steps").get<std::int64_t>();
    state.floating_point_operations_so_far = meta.at("floating_point_operations_so_far").get<double>();
    state.scheduler = meta.value("opt_param_scheduler", nlohmann::json());
    state.config = meta.at("config");
    state.grad_scaler = meta.value("grad_scaler", nlohmann::json());
  } catch (const nlohmann::json::exception& e) {
    MEGATRON_FAIL(meta_path, ": incomplete checkpoint metadata (", e.what(), ")");
  }
  MEGATRON_CHECK(state.iteration == iteration, meta_path, " records iteration ", state.iteration, ", the folder ",
                 iteration);
  const auto& files = meta.at("files");
  // One pass per file: the tensors and the file's checksum together. A filtered read that keeps
  // none of a file's tensors reads only its header (the ranks that need them check the file), so
  // each rank of the distributed optimizer reads about its own share of the state.
  auto read = [&](const char* name, const TensorFilter& keep = {}) {
    const std::string path = (dir / name).string();
    const nlohmann::json& expected = files.at(name);
    MEGATRON_CHECK(fs::exists(path), "checkpoint file ", path, " is missing: the checkpoint is partial");
    FileDigest digest;
    SafetensorsFile file;
    try {
      file = read_safetensors(path, keep, &digest);
    } catch (const Error&) {
      verify(path, expected);  // a damaged file: say so by its checksum when that fails
      throw;
    }
    if (digest.size > 0) check_digest(path, digest, expected);
    return std::move(file.tensors);
  };
  MEGATRON_CHECK(files.contains(kModelFile), meta_path, ": no model file recorded");
  if (load_model) state.model = read(kModelFile);
  if (load_optimizer) {
    for (const auto& [name, digest] : files.items()) {
      if (name == kOptimizerFile || name.starts_with("distrib_optim.")) state.optimizer_parts.push_back(read(name.c_str(), optimizer_filter));
    }
    MEGATRON_CHECK(!state.optimizer_parts.empty(), "checkpoint ", dir.string(),
                   " has no optimizer state (saved with --no-save-optim); use --no-load-optim or --finetune");
    if (state.optimizer_parts.size() == 1) state.optimizer = state.optimizer_parts.front();
  }
  if (load_rng) {
    // Megatron stops here too: a resume without the saved streams would not continue the run.
    MEGATRON_CHECK(files.contains(kRngFile), "checkpoint ", dir.string(),
                   " has no random-number-generator state (saved with --no-save-rng); use --no-load-rng or --finetune");
    state.rng = read(kRngFile);
  }
  return state;
}

}  // namespace megatron::checkpoint
