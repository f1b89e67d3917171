// Checkpoint layout and commit protocol (see checkpoint.h).
#include "megatron/checkpoint/checkpoint.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "megatron/core/check.h"
#include "megatron/core/file_io.h"

namespace megatron::checkpoint {
namespace {

namespace fs = std::filesystem;

constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kOptimizerFile = "optimizer.safetensors";
constexpr const char* kRngFile = "rng.safetensors";
constexpr const char* kMetaFile = "meta.json";

void write_text_atomically(const std::string& path, const std::string& text) {
  AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

nlohmann::json digest_json(const FileDigest& d) { return {{"size", d.size}, {"crc32", d.crc32}}; }

void verify(const std::string& path, const nlohmann::json& expected) {
  MEGATRON_CHECK(fs::exists(path), "checkpoint file ", path, " is missing: the checkpoint is partial");
  const FileDigest d = digest_file(path);
  const auto size = expected.at("size").get<std::uint64_t>();
  MEGATRON_CHECK(d.size == size, "checkpoint file ", path, " has ", d.size, " bytes, ", size,
                 " were written: the checkpoint is truncated or corrupt");
  MEGATRON_CHECK(d.crc32 == expected.at("crc32").get<std::uint32_t>(), "checkpoint file ", path,
                 " fails its CRC-32 check: the checkpoint is corrupt");
}

}  // namespace

std::string iteration_folder(const std::string& root, std::int64_t iteration) {
  char name[32];
  std::snprintf(name, sizeof(name), "iter_%07lld", static_cast<long long>(iteration));
  return (fs::path(root) / name).string();
}

void save_checkpoint(const std::string& root, const CheckpointState& state, const std::string& shard) {
  std::error_code ec;
  fs::create_directories(root, ec);
  MEGATRON_CHECK(!ec, "--save ", root, ": cannot create the folder (", ec.message(), ")");
  const std::string final_dir = iteration_folder(root, state.iteration);
  const std::string temp_dir = final_dir + ".tmp." + std::to_string(::getpid());
  fs::remove_all(temp_dir, ec);
  // Removed on an error here and by the signal handler on SIGINT/SIGTERM/SIGHUP.
  TemporaryFolder temp(temp_dir);
  fs::create_directories(fs::path(temp_dir) / shard, ec);
  MEGATRON_CHECK(!ec, "cannot create ", temp_dir, " (", ec.message(), ")");
  const fs::path dir = fs::path(temp_dir) / shard;
  nlohmann::json files;
  files[kModelFile] = digest_json(write_safetensors((dir / kModelFile).string(), state.model));
  if (!state.optimizer.empty()) {
    files[kOptimizerFile] = digest_json(write_safetensors((dir / kOptimizerFile).string(), state.optimizer));
  }
  if (!state.rng.empty()) files[kRngFile] = digest_json(write_safetensors((dir / kRngFile).string(), state.rng));
  const nlohmann::json meta = {
      {"format", "megatron-cpp"},
      {"format_version", kFormatVersion},
      {"iteration", state.iteration},
      {"consumed_train_samples", state.consumed_train_samples},
      {"consumed_valid_samples", state.consumed_valid_samples},
      {"scheduler_num_steps", state.scheduler_num_steps},
      {"optimizer_steps", state.optimizer_steps},
      {"floating_point_operations_so_far", state.floating_point_operations_so_far},
      {"config", state.config},
      {"files", files}};
  write_text_atomically((dir / kMetaFile).string(), meta.dump(2) + "\n");
  // The folder appears complete or not at all; a re-save of the same iteration replaces it.
  if (fs::exists(final_dir)) fs::remove_all(final_dir);
  fs::rename(temp_dir, final_dir);
  temp.release();
  // The tracker moves last.
  write_text_atomically((fs::path(root) / kTrackerFile).string(), std::to_string(state.iteration));
}

std::unique_ptr<OutputLock> lock_save_folder(const std::string& root) {
  std::error_code ec;
  fs::create_directories(root, ec);
  MEGATRON_CHECK(!ec, "--save ", root, ": cannot create the folder (", ec.message(), ")");
  return std::make_unique<OutputLock>((fs::path(root) / ".lock").string(), "--save " + root);
}

bool is_checkpoint_output(std::string_view name) {
  if (name == kTrackerFile || name == kRunConfigFile) return true;
  if (name.size() != 12 || name.substr(0, 5) != "iter_") return false;
  for (char c : name.substr(5)) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::vector<std::string> remove_stale_temporaries(const std::string& root) {
  return megatron::remove_stale_temporaries(root, is_checkpoint_output);
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

CheckpointState load_checkpoint(const std::string& root, std::int64_t iteration, const std::string& shard,
                                bool load_optimizer, bool load_rng) {
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
    state.config = meta.at("config");
  } catch (const nlohmann::json::exception& e) {
    MEGATRON_FAIL(meta_path, ": incomplete checkpoint metadata (", e.what(), ")");
  }
  MEGATRON_CHECK(state.iteration == iteration, meta_path, " records iteration ", state.iteration, ", the folder ",
                 iteration);
  const auto& files = meta.at("files");
  auto read = [&](const char* name) {
    const std::string path = (dir / name).string();
    verify(path, files.at(name));
    return read_safetensors(path).tensors;
  };
  MEGATRON_CHECK(files.contains(kModelFile), meta_path, ": no model file recorded");
  state.model = read(kModelFile);
  if (load_optimizer) {
    MEGATRON_CHECK(files.contains(kOptimizerFile), "checkpoint ", dir.string(),
                   " has no optimizer state (saved with --no-save-optim); use --no-load-optim or --finetune");
    state.optimizer = read(kOptimizerFile);
  }
  if (load_rng && files.contains(kRngFile)) state.rng = read(kRngFile);
  return state;
}

}  // namespace megatron::checkpoint
