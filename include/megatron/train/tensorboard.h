// TensorBoard event files for --tensorboard-dir, the way Megatron's SummaryWriter writes them:
// events.out.tfevents.<unix time>.<host>.<pid>.<n> in the folder, a "brain.Event:2" version
// record, then one record per scalar (tag, value, step). Records are TFRecord-framed (length,
// masked CRC-32C of the length, the Event protobuf, its masked CRC-32C), so TensorBoard reads a
// file that is still being written, and a file cut short by a crash up to its last whole record.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace megatron::train {

// Whether this build can write event files (protobuf and ISA-L were found at configure time).
bool tensorboard_available();

// CRC-32C (Castagnoli) of `data`, and TFRecord's masked form of it.
std::uint32_t crc32c(std::string_view data);
std::uint32_t masked_crc32c(std::string_view data);

class TensorBoardWriter {
 public:
  // Creates `dir` and a new event file in it. `queue_size` is Megatron's
  // --tensorboard-queue-size: records held in memory before they are written. As PyTorch's
  // SummaryWriter, queued records are also written once 120 s passed since the last write;
  // flush() and the destructor write the rest. Throws megatron::Error naming the folder or file.
  TensorBoardWriter(const std::string& dir, int queue_size);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  void add_scalar(const std::string& tag, double value, std::int64_t step);
  void flush();  // writes what is queued and flushes it to the operating system
  const std::string& path() const { return path_; }

 private:
  void append_record(const std::string& payload);

  std::string path_;
  std::FILE* file_ = nullptr;
  std::string pending_;  // framed records not yet written
  int queued_ = 0;
  int queue_size_;
  std::chrono::steady_clock::time_point last_flush_;
};

}  // namespace megatron::train
