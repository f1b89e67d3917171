// The safetensors reader and writer: the standard header, filtered and mapped reads, the CRC, and
// refusal of every malformed file the safetensors library itself refuses (its refusals of these
// files were checked with safetensors 0.8's load_file; tests/e2e/huggingface_hostile_input.sh
// runs that library on the same kind of files).
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "megatron/checkpoint/safetensors.h"
#include "megatron/core/check.h"
#include "test_support.h"

namespace megatron::checkpoint {
namespace {

using megatron::testing::error_of;
using megatron::testing::expect_contains;
using testing::TempDir;

// Writes a file with the given header text and `data_bytes` zero bytes of data.
std::string write_raw(const TempDir& dir, const std::string& header, std::size_t data_bytes) {
  const std::string path = dir / "raw.safetensors";
  std::string bytes(8, '\0');
  const std::uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  bytes += header;
  bytes.append(data_bytes, '\0');
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(Safetensors, HeaderIsStandardAndDataAligned) {
  TempDir dir("st");
  const std::string path = dir / "t.safetensors";
  write_safetensors(path, {{"b", at::tensor({1.0f, 2.0f})}, {"a", at::tensor({int64_t{7}})}}, {{"k", "v"}});
  const std::string bytes = testing::read_file_bytes(path);
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(header["b"]["dtype"], "F32");
  EXPECT_EQ(header["b"]["data_offsets"], (std::vector<int>{0, 8}));
  EXPECT_EQ(header["a"]["dtype"], "I64");
  EXPECT_EQ(header["__metadata__"]["k"], "v");
  const auto back = read_safetensors(path);
  ASSERT_EQ(back.tensors.size(), 2u);
  EXPECT_EQ(back.tensors[0].first, "b");  // file order kept
  EXPECT_EQ(back.tensors[1].second.item<int64_t>(), 7);
}

TEST(Safetensors, FilterReadsOnlyTheTensorsItKeeps) {
  TempDir dir("st");
  const std::string path = dir / "t.safetensors";
  write_safetensors(path, {{"x/param/0", at::arange(6, at::kFloat)}, {"x/param/6", at::arange(4, at::kFloat)},
                           {"y/param/0", at::ones({2, 3})}});
  std::vector<std::pair<std::string, std::int64_t>> asked;
  const auto back = read_safetensors(path, [&](const std::string& name, std::int64_t numel) {
    asked.emplace_back(name, numel);
    return name.starts_with("x/");
  });
  ASSERT_EQ(back.tensors.size(), 2u);
  EXPECT_EQ(back.tensors[0].first, "x/param/0");
  EXPECT_TRUE(at::equal(back.tensors[1].second, at::arange(4, at::kFloat)));
  EXPECT_EQ(asked.size(), 3u);
  EXPECT_NE(std::find(asked.begin(), asked.end(), std::make_pair(std::string("y/param/0"), std::int64_t{6})),
            asked.end());
}


// A header whose shape times the element size wraps around 2^64 must not pass the size check
// (the tensors are views of the file's mapping: a wrapped size would reach past it).
TEST(Safetensors, AShapeTooLargeForTheFileIsRefused) {
  TempDir dir("st");
  const std::string path = dir / "t.safetensors";
  const std::string header = R"({"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})";
  std::string bytes(8, '\0');
  const std::uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  bytes += header;
  std::ofstream(path, std::ios::binary) << bytes;
  try {
    read_safetensors(path);
    ADD_FAILURE() << "expected the read to fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor w needs 4611686018427387904 elements"), std::string::npos) << e.what();
  }
}

// The checksum recorded in meta.json must stay zlib's CRC-32, whichever library computes it.
TEST(Safetensors, Crc32IsZlibsAndChains) {
  std::mt19937 gen(7);
  std::string bytes(3 << 20, '\0');
  for (char& c : bytes) c = static_cast<char>(gen());
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{63}, std::size_t{4096 + 5}, bytes.size()}) {
    const auto* p = reinterpret_cast<const Bytef*>(bytes.data());
    const auto expected = static_cast<std::uint32_t>(crc32(0L, p, static_cast<uInt>(n)));
    EXPECT_EQ(crc32_update(0, bytes.data(), n), expected) << n << " bytes";
    EXPECT_EQ(crc32_update(crc32_update(0, bytes.data(), n / 3), bytes.data() + n / 3, n - n / 3), expected) << n;
  }
}

// One pass gives the tensors and the whole file's digest; the tensors are views of a private
// mapping: writable, and writing them leaves the file alone. A tensor after an odd-sized one sits
// at an unaligned offset and still reads right.
TEST(Safetensors, ReadGivesTheDigestAndWritableTensors) {
  TempDir dir("st");
  const std::string path = dir / "t.safetensors";
  const at::Tensor odd = at::arange(3, at::kFloat).to(at::kBFloat16);  // 6 bytes
  const at::Tensor after = at::arange(5, at::kFloat) / 3;
  const FileDigest written = write_safetensors(path, {{"odd", odd}, {"after", after}});
  FileDigest digest;
  auto back = read_safetensors(path, {}, &digest);
  EXPECT_EQ(digest.size, written.size);
  EXPECT_EQ(digest.crc32, written.crc32);
  EXPECT_EQ(digest.crc32, digest_file(path).crc32);
  ASSERT_EQ(back.tensors.size(), 2u);
  EXPECT_TRUE(at::equal(back.tensors[0].second, odd));
  EXPECT_TRUE(at::equal(back.tensors[1].second, after));
  back.tensors[1].second.fill_(42.0f);
  EXPECT_EQ(digest_file(path).crc32, written.crc32);
  EXPECT_TRUE(at::equal(read_safetensors(path).tensors[1].second, after));
  // A filter that keeps nothing reads only the header: no digest.
  FileDigest none;
  EXPECT_TRUE(read_safetensors(path, [](const std::string&, std::int64_t) { return false; }, &none).tensors.empty());
  EXPECT_EQ(none.size, 0u);
}

// Byte ranges must tile the data: overlapping ranges would alias two tensors, gaps and trailing
// bytes mean the file is not what its header says (the safetensors library refuses all three).
TEST(Safetensors, TensorsMustCoverTheDataExactly) {
  TempDir dir("st");
  const auto refused = [&](const std::string& header, std::size_t bytes, std::initializer_list<std::string> parts) {
    const std::string path = write_raw(dir, header, bytes);
    expect_contains(error_of([&] { read_safetensors(path); }), parts);
    // Refused whether the tensors are read or only the header is.
    expect_contains(error_of([&] { read_safetensors(path, [](const std::string&, std::int64_t) { return false; }); }),
                    {path});
  };
  refused(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
          12, {"raw.safetensors: tensors a [0, 8) and b [4, 12) share data bytes"});
  refused(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
          12, {"raw.safetensors: data bytes [4, 8) belong to no tensor"});
  refused(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 12,
          {"raw.safetensors: 4 bytes after the last tensor's data"});
  // A file whose only tensors are empty has no data bytes to cover.
  refused(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})", 3, {"3 bytes after the last tensor's data"});
  // An empty tensor between two others, listed first, is fine.
  const std::string fine = write_raw(
      dir,
      R"({"e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
      R"("c":{"dtype":"I32","shape":[1],"data_offsets":[4,8]}})",
      8);
  const auto back = read_safetensors(fine);
  ASSERT_EQ(back.tensors.size(), 3u);
  EXPECT_EQ(back.tensors[0].first, "b");  // in the order of the data
  EXPECT_EQ(back.tensors[1].second.numel(), 0);
  EXPECT_EQ(back.tensors[2].second.scalar_type(), at::kInt);
}

// A JSON parser keeps one of two equal keys without a word; which tensor the file means is unknown.
TEST(Safetensors, ATensorNamedTwiceIsRefused) {
  TempDir dir("st");
  const std::string path = write_raw(
      dir, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
      12);
  expect_contains(error_of([&] { read_safetensors(path); }), {path, ": the safetensors header names \"a\" twice"});
}

TEST(Safetensors, MetadataMustBeAMapOfStrings) {
  TempDir dir("st");
  const std::string tensor = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  std::string path = write_raw(dir, R"({"__metadata__":{"format":"pt","step":1},)" + tensor + "}", 8);
  expect_contains(error_of([&] { read_safetensors(path); }),
                  {path, ": the safetensors __metadata__ entry \"step\" is a JSON number; the format needs strings"});
  path = write_raw(dir, R"({"__metadata__":[1],)" + tensor + "}", 8);
  expect_contains(error_of([&] { read_safetensors(path); }), {path, ": the safetensors __metadata__ is a JSON array"});
  path = write_raw(dir, R"({"__metadata__":null,)" + tensor + "}", 8);  // the library reads null as none
  EXPECT_TRUE(read_safetensors(path).metadata.empty());
}

TEST(Safetensors, AHeaderLargerThanTheFormatAllowsIsRefused) {
  TempDir dir("st");
  const std::string path = dir / "huge.safetensors";
  {
    std::ofstream out(path, std::ios::binary);
    const std::uint64_t n = 100'000'001;
    out.write(reinterpret_cast<const char*>(&n), 8);
  }
  std::filesystem::resize_file(path, 8 + 100'000'001);
  expect_contains(error_of([&] { read_safetensors(path); }),
                  {path, ": a safetensors header of 100000001 bytes (the format allows 100000000)"});
}

}  // namespace
}  // namespace megatron::checkpoint
