#include "megatron/train/tensorboard.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "megatron/core/check.h"
#include "megatron/core/strings.h"

#if MEGATRON_HAVE_TENSORBOARD
#include <isa-l/crc.h>

#include "tensorboard_event.pb.h"
#endif

namespace megatron::train {
namespace {

constexpr auto kFlushEvery = std::chrono::seconds(120);  // SummaryWriter's flush_secs

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void put_le(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

}  // namespace

bool tensorboard_available() { return MEGATRON_HAVE_TENSORBOARD != 0; }

std::uint32_t crc32c(std::string_view data) {
#if MEGATRON_HAVE_TENSORBOARD
  // ISA-L's iSCSI CRC is CRC-32C without the final inversion; started from ~0 as the standard.
  auto* bytes = reinterpret_cast<unsigned char*>(const_cast<char*>(data.data()));
  std::uint32_t crc = 0xFFFFFFFFu;
  // crc32_iscsi takes an int length: feed very large inputs in pieces.
  constexpr std::size_t kPiece = std::size_t{1} << 30;
  for (std::size_t done = 0; done < data.size(); done += kPiece) {
    const std::size_t n = std::min(kPiece, data.size() - done);
    crc = crc32_iscsi(bytes + done, static_cast<int>(n), crc);
  }
  return crc ^ 0xFFFFFFFFu;
#else
  (void)data;
  MEGATRON_FAIL("this build has no CRC-32C (ISA-L was not found at configure time)");
#endif
}

std::uint32_t masked_crc32c(std::string_view data) {
  const std::uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;  // TFRecord's mask
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir, int queue_size)
    : queue_size_(queue_size > 0 ? queue_size : 1), last_flush_(std::chrono::steady_clock::now()) {
#if MEGATRON_HAVE_TENSORBOARD
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  MEGATRON_CHECK(!ec, "--tensorboard-dir ", dir, ": cannot create the folder (", ec.message(), ")");
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "localhost");
  // The same name PyTorch's SummaryWriter gives: TensorBoard orders a run's files by it.
  const auto seconds = static_cast<long long>(wall_time_now());
  for (int n = 0;; ++n) {
    char name[64];
    std::snprintf(name, sizeof(name), "%010lld", seconds);
    path_ = (std::filesystem::path(dir) / str_cat("events.out.tfevents.", name, ".", host, ".", ::getpid(), ".", n)).string();
    if (!std::filesystem::exists(path_)) break;
  }
  file_ = std::fopen(path_.c_str(), "wb");
  MEGATRON_CHECK(file_ != nullptr, "--tensorboard-dir: cannot create ", path_, " (", std::strerror(errno), ")");
  megatron::tensorboard::Event version;
  version.set_wall_time(wall_time_now());
  version.set_file_version("brain.Event:2");
  append_record(version.SerializeAsString());
  flush();
#else
  (void)dir;
  MEGATRON_FAIL("--tensorboard-dir: this build cannot write TensorBoard event files (protobuf or ISA-L was not found "
                "at configure time; scripts/setup.sh installs libprotobuf-dev, protobuf-compiler and libisal-dev)");
#endif
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_ == nullptr) return;
  try {
    flush();
  } catch (const Error&) {
    // Already reported where possible; a destructor must not throw.
  }
  std::fclose(file_);
}

void TensorBoardWriter::add_scalar(const std::string& tag, double value, std::int64_t step) {
#if MEGATRON_HAVE_TENSORBOARD
  megatron::tensorboard::Event event;
  event.set_wall_time(wall_time_now());
  event.set_step(step);
  megatron::tensorboard::SummaryValue* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(static_cast<float>(value));
  append_record(event.SerializeAsString());
  if (++queued_ >= queue_size_ || std::chrono::steady_clock::now() - last_flush_ >= kFlushEvery) flush();
#else
  (void)tag, (void)value, (void)step;
#endif
}

void TensorBoardWriter::append_record(const std::string& payload) {
  std::string length;
  put_le(length, payload.size(), 8);
  pending_ += length;
  put_le(pending_, masked_crc32c(length), 4);
  pending_ += payload;
  put_le(pending_, masked_crc32c(payload), 4);
}

void TensorBoardWriter::flush() {
  last_flush_ = std::chrono::steady_clock::now();
  queued_ = 0;
  if (pending_.empty()) return;
  const std::size_t written = std::fwrite(pending_.data(), 1, pending_.size(), file_);
  const bool ok = written == pending_.size() && std::fflush(file_) == 0;
  pending_.clear();
  MEGATRON_CHECK(ok, "cannot write TensorBoard events to ", path_, " (", std::strerror(errno), ")");
}

}  // namespace megatron::train
