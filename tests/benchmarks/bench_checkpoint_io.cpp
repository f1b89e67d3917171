// Checkpoint save and load speed against the disk's own sequential bandwidth, measured in one run
// on the same folder: the disk's figure is a plain write of the same byte count in 16 MiB blocks
// followed by fsync (what `dd bs=16M conv=fsync` does) and a plain read of that file with the
// page cache emptied first; the checkpoint is a GPT-like state of bf16 weights and fp32 optimizer
// state (14 bytes per parameter, as Megatron's mixed-precision Adam keeps), saved by
// save_checkpoint (sync, and with --async-save's AsyncCheckpointSaver: the call's stall and the
// time until the tracker moved) and read back by load_checkpoint in a fresh process, as a resumed
// job reads it, also from an empty page cache.
// Reads are measured twice: right after the writes (the disk's read follows its write, the load
// follows that read) and after --settle seconds of quiet (sync, then sleep). On the virtual machine
// this was written on (Firecracker, with virtio-balloon free page reporting) the same read of the
// same files ran anywhere from 0.4 to 2.7 GB/s depending on what the machine and its host did in
// the seconds before: slow first touches of memory the host must back again, without a single
// page fault inside the guest. A bare-metal node should not have this (not measured); the two
// conditions bracket it.
// With --format torch_dist the checkpoint is Megatron-Core's distributed format as
// `--ckpt-format torch_dist` writes it (fp32 weights only, each layer's tensors stacked under
// Megatron's keys; the optimizer state is not written in that format yet), and the load reads every
// global tensor back through DcpCheckpoint; async is not measured there.
// Each figure is the best of --repeat runs, raw and checkpoint alternating. Usage:
//   build/tests/benchmarks/bench_checkpoint_io [--size-gb 1] [--repeat 3] [--dir /tmp] [--settle 10]
//                                              [--format megatron_cpp|torch_dist]
#include <fcntl.h>
#include <unistd.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "megatron/checkpoint/async_saver.h"
#include "megatron/checkpoint/checkpoint.h"
#include "megatron/checkpoint/dcp.h"
#include "megatron/checkpoint/saved_run.h"
#include "megatron/checkpoint/torch_dist.h"
#include "megatron/core/check.h"
#include "megatron/parallel/parallel_context.h"
#include "megatron/parallel/single_process_context.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using megatron::checkpoint::CheckpointState;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Drops the file's pages from the page cache (clean pages only: call after fsync), so that the
// next read comes from the disk.
void evict(const fs::path& path) {
  if (fs::is_directory(path)) {
    for (const auto& e : fs::recursive_directory_iterator(path)) {
      if (e.is_regular_file()) evict(e.path());
    }
    return;
  }
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

constexpr std::size_t kBlock = 16u << 20;

void settle_down(double seconds) {
  ::sync();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

double raw_write(const fs::path& path, std::uint64_t bytes, const std::vector<char>& block) {
  fs::remove(path);
  ::sync();
  const auto start = Clock::now();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  MEGATRON_CHECK(fd >= 0, "cannot create ", path.string());
  for (std::uint64_t done = 0; done < bytes;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kBlock, bytes - done));
    MEGATRON_CHECK(::write(fd, block.data(), n) == static_cast<ssize_t>(n), "write failed");
    done += n;
  }
  MEGATRON_CHECK(::fsync(fd) == 0, "fsync failed");
  ::close(fd);
  return seconds_since(start);
}

double raw_read(const fs::path& path, std::vector<char>& block, double settle) {
  evict(path);
  settle_down(settle);
  const auto start = Clock::now();
  const int fd = ::open(path.c_str(), O_RDONLY);
  MEGATRON_CHECK(fd >= 0, "cannot open ", path.string());
  while (::read(fd, block.data(), block.size()) > 0) {
  }
  ::close(fd);
  return seconds_since(start);
}

// A GPT-like state of about `bytes`: per layer a QKV, a projection and two MLP matrices, bf16
// weights plus fp32 main weights and two Adam moments for each.
// `model_only`: fp32 weights and nothing else (a torch_dist save's part), `bytes` of them.
CheckpointState make_state(std::uint64_t bytes, int hidden, bool model_only = false) {
  CheckpointState s;
  s.iteration = 1;
  s.config = {{"benchmark", true}};
  const std::vector<std::pair<const char*, std::int64_t>> shapes = {
      {"self_attention.linear_qkv.weight", 3}, {"self_attention.linear_proj.weight", 1},
      {"mlp.linear_fc1.weight", 4}, {"mlp.linear_fc2.weight", 4}};
  std::uint64_t total = 0;
  for (int layer = 0; total < bytes; ++layer) {
    for (const auto& [name, rows] : shapes) {
      const std::string full = "decoder.layers." + std::to_string(layer) + "." + name;
      const at::Tensor w = at::randn({rows * hidden, hidden});
      if (model_only) {
        s.model.emplace_back(full, w);
        total += static_cast<std::uint64_t>(w.numel()) * 4;
        continue;
      }
      s.model.emplace_back(full, w.to(at::kBFloat16));
      s.optimizer.emplace_back(full + ".main", w);
      s.optimizer.emplace_back(full + ".exp_avg", at::randn_like(w));
      s.optimizer.emplace_back(full + ".exp_avg_sq", at::rand_like(w));
      total += static_cast<std::uint64_t>(w.numel()) * 14;
    }
  }
  if (model_only) {  // the run record a torch_dist save turns into Megatron's args
    megatron::checkpoint::SavedRun run;
    run.model = megatron::model::ModelConfig{};
    run.model->num_layers = static_cast<int>(s.model.size() / shapes.size());
    s.config = run.to_json();
  }
  return s;
}

// The writer of a one-process torch_dist save of `state` (every tensor whole, layers stacked).
megatron::checkpoint::ShardWriter torch_dist_writer(const CheckpointState& state) {
  static const std::vector<megatron::parallel::TensorParallelLayout> layouts(state.model.size());
  const auto model = megatron::checkpoint::SavedRun::from_json(state.config, "bench").model_config("bench");
  const megatron::parallel::PipelineLayout whole{model.num_layers, 1, 1, std::nullopt, std::nullopt};
  const megatron::checkpoint::ReshardTarget target{.params = state.model, .layouts = layouts, .layout = whole};
  megatron::checkpoint::ShardWriter writer;
  writer.torch_dist = std::make_shared<megatron::checkpoint::TorchDistPlan>(
      megatron::checkpoint::plan_torch_dist(target, model, true));
  return writer;
}

// Runs this program again with BENCH_LOAD_ONLY set to the checkpoint's folder: the child loads it
// as a resumed job would and prints the seconds.
double load_in_fresh_process(const char* self, const fs::path& root, const std::string& format) {
  const std::string command = "BENCH_FORMAT=" + format + " BENCH_LOAD_ONLY='" + root.string() + "' '" + self + "'";
  FILE* child = ::popen(command.c_str(), "r");
  MEGATRON_CHECK(child != nullptr, "cannot run ", command);
  double seconds = -1;
  const int got = std::fscanf(child, "%lf", &seconds);
  MEGATRON_CHECK(::pclose(child) == 0 && got == 1 && seconds > 0, "the child process failed: ", command);
  return seconds;
}

std::uint64_t folder_bytes(const fs::path& dir) {
  std::uint64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) n += e.file_size();
  }
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  double size_gb = 1.0;
  int repeat = 3;
  std::string dir = "/tmp";
  double settle = 10;
  std::string format = "megatron_cpp";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--size-gb") size_gb = std::atof(argv[i + 1]);
    else if (flag == "--repeat") repeat = std::atoi(argv[i + 1]);
    else if (flag == "--dir") dir = argv[i + 1];
    else if (flag == "--settle") settle = std::atof(argv[i + 1]);
    else if (flag == "--format") format = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  try {
    if (const char* only = std::getenv("BENCH_LOAD_ONLY")) {  // the child of load_in_fresh_process
      evict(only);
      const auto start = Clock::now();
      if (std::string(std::getenv("BENCH_FORMAT")) == "torch_dist") {
        const megatron::checkpoint::DcpCheckpoint dcp(megatron::checkpoint::iteration_folder(only, 1));
        std::int64_t elements = 0;
        for (const auto& [key, t] : dcp.tensors()) elements += dcp.read(key).numel();
        MEGATRON_CHECK(elements > 0, "the loaded checkpoint is empty");
      } else {
        const auto loaded = megatron::checkpoint::load_checkpoint(only, 1, "mp_rank_00", true, false);
        MEGATRON_CHECK(!loaded.model.empty() && !loaded.optimizer.empty(), "the loaded checkpoint is empty");
      }
      std::printf("%.6f\n", seconds_since(start));
      return 0;
    }
    MEGATRON_CHECK(format == "megatron_cpp" || format == "torch_dist", "--format ", format,
                   ": expected megatron_cpp or torch_dist");
    const bool torch_dist = format == "torch_dist";
    const fs::path work = fs::path(dir) / ("bench_checkpoint_io." + std::to_string(::getpid()));
    fs::create_directories(work);
    const CheckpointState state = make_state(static_cast<std::uint64_t>(size_gb * 1e9), 2048, torch_dist);
    const megatron::checkpoint::ShardWriter writer =
        torch_dist ? torch_dist_writer(state) : megatron::checkpoint::ShardWriter{};
    const fs::path root = work / "ckpt";
    const fs::path raw = work / "raw.bin";
    std::vector<char> block(kBlock, 1);
    const auto comm = megatron::parallel::make_single_process_communicator();
    const megatron::parallel::ParallelState ps(megatron::parallel::ParallelConfig{}, 0);
    const auto pc = megatron::parallel::ParallelContext::create(ps, *comm);

    double best_raw_w = 1e30, best_save = 1e30;
    double best_raw_r = 1e30, best_load = 1e30, best_raw_r_idle = 1e30, best_load_idle = 1e30;
    double first_stall = 0, best_stall = 1e30, best_async = 1e30;
    // One saver for all repeats, as in training: the first save allocates its snapshot, the
    // later ones refill it.
    megatron::checkpoint::AsyncCheckpointSaver saver(pc);
    std::uint64_t bytes = 0;
    for (int r = 0; r < repeat; ++r) {
      fs::remove_all(root);
      ::sync();  // no write-back of earlier files competes with the measurement
      auto start = Clock::now();
      megatron::checkpoint::save_checkpoint(root.string(), state, writer, pc);
      best_save = std::min(best_save, seconds_since(start));
      bytes = folder_bytes(root);
      best_raw_w = std::min(best_raw_w, raw_write(raw, bytes, block));
      best_raw_r = std::min(best_raw_r, raw_read(raw, block, 0));
      best_load = std::min(best_load, load_in_fresh_process(argv[0], root, format));
      best_raw_r_idle = std::min(best_raw_r_idle, raw_read(raw, block, settle));
      settle_down(settle);
      best_load_idle = std::min(best_load_idle, load_in_fresh_process(argv[0], root, format));

      if (torch_dist) continue;  // async: as for this build's format, not measured again
      fs::remove_all(root);
      ::sync();
      {
        start = Clock::now();
        saver.start(root.string(), state, megatron::checkpoint::ShardWriter{});
        const double stall = seconds_since(start);
        if (r == 0) {
          first_stall = stall;
        } else {
          best_stall = std::min(best_stall, stall);
        }
        saver.poll(/*blocking=*/true);
        best_async = std::min(best_async, seconds_since(start));
      }
      MEGATRON_CHECK(megatron::checkpoint::read_tracker(root.string()) == 1, "the async save did not commit");
    }
    if (std::getenv("BENCH_KEEP")) std::printf("kept %s\n", work.c_str()); else fs::remove_all(work);
    const double gb = static_cast<double>(bytes) / 1e9;
    char later[32] = "-";  // no later save with --repeat 1
    if (repeat > 1) std::snprintf(later, sizeof later, "%.2f s", best_stall);
    std::printf("format %s\n| checkpoint | disk write (fsync) | save (sync) | save / disk | async stall (first / "
                "later saves) | async until durable |\n|---|---|---|---|---|---|\n", format.c_str());
    if (torch_dist) {
      std::printf("| %.2f GB | %.2f GB/s | %.2f GB/s (%.2f s) | %.0f%% | - | - |\n\n", gb, gb / best_raw_w,
                  gb / best_save, best_save, 100.0 * best_raw_w / best_save);
    } else {
      std::printf("| %.2f GB | %.2f GB/s | %.2f GB/s (%.2f s) | %.0f%% | %.2f s / %s | %.2f GB/s (%.2f s) |\n\n", gb,
                  gb / best_raw_w, gb / best_save, best_save, 100.0 * best_raw_w / best_save, first_stall, later,
                  gb / best_async, best_async);
    }
    std::printf("| checkpoint | disk read (cold), right after the writes | load (cold, fresh process), right after | load / disk "
                "| disk read after %.0f s idle | load after %.0f s idle | load / disk |\n|---|---|---|---|---|---|---|\n",
                settle, settle);
    std::printf("| %.2f GB | %.2f GB/s | %.2f GB/s (%.2f s) | %.0f%% | %.2f GB/s | %.2f GB/s (%.2f s) | %.0f%% |\n", gb,
                gb / best_raw_r, gb / best_load, best_load, 100.0 * best_raw_r / best_load, gb / best_raw_r_idle,
                gb / best_load_idle, best_load_idle, 100.0 * best_raw_r_idle / best_load_idle);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_checkpoint_io: %s\n", e.what());
    return 1;
  }
  return 0;
}
