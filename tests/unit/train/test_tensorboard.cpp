// The event-file writer's pieces against independent references: CRC-32C against the check
// values of RFC 3720 (B.4) and the catalogue's "123456789", TFRecord's framing read back by hand
// (TensorBoard's own reader reads whole runs in tests/e2e/tensorboard_reads_the_log.sh).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "megatron/core/check.h"
#include "megatron/train/tensorboard.h"
#include "test_support.h"

namespace megatron::train {
namespace {

namespace fs = std::filesystem;

TEST(TensorBoard, Crc32cMatchesPublishedCheckValues) {
  if (!tensorboard_available()) GTEST_SKIP() << "built without protobuf/ISA-L";
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending(32, '\0');
  for (int i = 0; i < 32; ++i) ascending[static_cast<std::size_t>(i)] = static_cast<char>(i);
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(crc32c(""), 0u);
}

std::uint64_t read_le(const std::string& bytes, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[at + static_cast<std::size_t>(i)]);
  return v;
}

// TFRecord's masked CRC (tensorflow/core/lib/hash/crc32c.h: rotate right by 15, add 0xa282ead8),
// written out here from the format's definition, on the published CRC-32C.
std::uint32_t tfrecord_mask(std::uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

TEST(TensorBoard, MaskedCrcIsTfRecords) {
  if (!tensorboard_available()) GTEST_SKIP() << "built without protobuf/ISA-L";
  EXPECT_EQ(masked_crc32c("123456789"), tfrecord_mask(0xE3069283u));
  EXPECT_EQ(masked_crc32c(""), 0xa282ead8u);
}

TEST(TensorBoard, RecordsAreFramedAndQueuedUntilFlushed) {
  if (!tensorboard_available()) GTEST_SKIP() << "built without protobuf/ISA-L";
  testing::TempDir dir("tensorboard");
  std::string path;
  {
    TensorBoardWriter writer(dir / "run", 3);
    path = writer.path();
    EXPECT_EQ(fs::path(path).parent_path(), fs::path(dir / "run"));
    EXPECT_EQ(fs::path(path).filename().string().rfind("events.out.tfevents.", 0), 0u);
    const auto size_after_version = fs::file_size(path);
    EXPECT_GT(size_after_version, 16u) << "the version record is written at once";
    writer.add_scalar("lm loss", 10.5, 1);
    writer.add_scalar("lm loss", 0.0, 2);  // a zero must be written (TensorBoard's oneof)
    EXPECT_EQ(fs::file_size(path), size_after_version) << "queued below --tensorboard-queue-size";
    writer.add_scalar("lm loss", -1.25, 3);
    EXPECT_GT(fs::file_size(path), size_after_version) << "the third record fills the queue of 3";
    writer.add_scalar("grad-norm", 2.0, 3);
  }  // the destructor writes the rest
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t at = 0;
  int records = 0;
  std::string last_payload;
  while (at < bytes.size()) {
    ASSERT_LE(at + 12, bytes.size());
    const std::uint64_t length = read_le(bytes, at, 8);
    EXPECT_EQ(read_le(bytes, at + 8, 4), tfrecord_mask(crc32c(bytes.substr(at, 8)))) << "record " << records;
    ASSERT_LE(at + 12 + length + 4, bytes.size());
    last_payload = bytes.substr(at + 12, length);
    EXPECT_EQ(read_le(bytes, at + 12 + length, 4), tfrecord_mask(crc32c(last_payload))) << "record " << records;
    at += 12 + length + 4;
    ++records;
  }
  EXPECT_EQ(records, 5);  // the version, four scalars
  EXPECT_NE(last_payload.find("grad-norm"), std::string::npos);
  // simple_value (field 2, fixed32: key 0x15) holds 2.0f.
  const std::size_t key = last_payload.rfind('\x15');
  ASSERT_NE(key, std::string::npos);
  float value = 0;
  std::memcpy(&value, last_payload.data() + key + 1, 4);
  EXPECT_EQ(value, 2.0f);
}

TEST(TensorBoard, AFolderThatCannotBeMadeIsNamed) {
  if (!tensorboard_available()) GTEST_SKIP() << "built without protobuf/ISA-L";
  testing::TempDir dir("tensorboard_bad");
  dir.write("file", "x");
  try {
    TensorBoardWriter writer(dir / "file/run", 10);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--tensorboard-dir " + (dir / "file/run")), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace megatron::train
