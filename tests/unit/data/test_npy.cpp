// .npy reading and writing against files numpy.save wrote, MD5 against RFC 1321's vectors, and
// the description JSON against Python's json.dumps(indent=4).
#include <gtest/gtest.h>

#include "megatron/data/md5.h"
#include "megatron/data/npy.h"
#include "megatron/data/python_json.h"
#include "reference_data.h"

namespace megatron::data {
namespace {

using testing::expect_contains;
using testing::read_file_bytes;
using testing::TempDir;

// The values gpt_dataset_reference.py writes: ((i * 7919 - 3) mod 30011) cast to the dtype.
template <typename T>
T pattern(std::int64_t i) {
  const std::int64_t v = ((i * 7919 - 3) % 30011 + 30011) % 30011;
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<std::uint64_t>(v));
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
void check_file(const std::string& path, const std::vector<std::uint64_t>& shape) {
  const NpyArray array = NpyArray::map(path);
  ASSERT_EQ(array.shape(), shape) << path;
  const std::span<const T> values = array.values<T>();
  for (std::size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(values[i], pattern<T>(static_cast<std::int64_t>(i))) << path << " element " << i;
  }
  // Writing the same array gives numpy's bytes exactly.
  std::vector<T> copy(values.begin(), values.end());
  TempDir dir;
  save_npy<T>(dir / "out.npy", copy, shape);
  EXPECT_EQ(read_file_bytes(dir / "out.npy"), read_file_bytes(path)) << path;
}

TEST(Npy, ReadsAndRewritesNumpySavedFilesByteForByte) {
  MEGATRON_REQUIRE_REFERENCE();
  int checked = 0;
  for (const auto& c : ref.manifest()["npy"]) {
    const std::string path = ref.path("npy/" + c["file"].get<std::string>());
    const auto shape = c["shape"].get<std::vector<std::uint64_t>>();
    const std::string dtype = c["dtype"].get<std::string>();
    if (dtype == "int16") {
      check_file<std::int16_t>(path, shape);
    } else if (dtype == "int32") {
      check_file<std::int32_t>(path, shape);
    } else if (dtype == "int64") {
      check_file<std::int64_t>(path, shape);
    } else if (dtype == "uint32") {
      check_file<std::uint32_t>(path, shape);
    } else if (dtype == "uint16") {
      check_file<std::uint16_t>(path, shape);
    } else if (dtype == "uint8") {
      check_file<std::uint8_t>(path, shape);
    } else if (dtype == "float32") {
      check_file<float>(path, shape);
    } else {
      check_file<double>(path, shape);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 56);
}

TEST(Npy, HeaderIsPaddedTo64BytesWithGrowthRoom) {
  const std::vector<std::uint64_t> shape = {10};
  const std::string header = npy_header(NpyDType::kInt32, shape);
  EXPECT_EQ(header.size(), 128u);
  EXPECT_EQ(header.substr(10, 58), "{'descr': '<i4', 'fortran_order': False, 'shape': (10,), }");
  EXPECT_EQ(header.back(), '\n');
}

TEST(Npy, ReadsAHeaderOfAnyLengthAndMisalignedData) {
  TempDir dir;
  // A version 1.0 header 16-byte aligned (older numpy) with the data at offset 80, and one
  // whose data starts at an odd offset (copied on read).
  for (const std::size_t total : {std::size_t{80}, std::size_t{83}}) {
    std::string dict = "{'shape': (3,), 'fortran_order': False, 'descr': '<i8'}";
    dict.append(total - 10 - dict.size() - 1, ' ');
    dict += '\n';
    std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
    bytes += static_cast<char>(dict.size());
    bytes += '\0';
    bytes += dict;
    for (std::int64_t v : {5, -6, 7}) bytes.append(reinterpret_cast<const char*>(&v), 8);
    const NpyArray array = NpyArray::map(dir.write("a.npy", bytes));
    ASSERT_EQ(array.size(), 3u);
    EXPECT_EQ(array.values<std::int64_t>()[1], -6);
  }
}

TEST(Npy, RejectsTruncatedAndMalformedFiles) {
  TempDir dir;
  std::vector<std::int32_t> values = {1, 2, 3, 4};
  save_npy<std::int32_t>(dir / "good.npy", values);
  const std::string good = read_file_bytes(dir / "good.npy");
  expect_contains(testing::error_of(
                      [&] { NpyArray::map(dir.write("t.npy", good.substr(0, good.size() - 3))); }),
                  {"t.npy", "truncated or corrupt"});
  expect_contains(
      testing::error_of([&] { NpyArray::map(dir.write("m.npy", "PK\x03\x04 not npy")); }),
      {"m.npy", "not a .npy file"});
  std::string bad_dtype = good;
  bad_dtype.replace(bad_dtype.find("<i4"), 3, ">i4");
  expect_contains(testing::error_of([&] { NpyArray::map(dir.write("d.npy", bad_dtype)); }),
                  {"d.npy", "unsupported .npy dtype '>i4'"});
  expect_contains(testing::error_of([&] { NpyArray::map(dir.write("e.npy", good.substr(0, 40))); }),
                  {"e.npy", "truncated .npy header"});
  const NpyArray array = NpyArray::map(dir / "good.npy");
  expect_contains(testing::error_of([&] { array.values<std::int64_t>(); }),
                  {"expected int64 elements, the file holds int32"});
}

TEST(Md5, MatchesRfc1321TestSuite) {
  EXPECT_EQ(md5_hex(""), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(md5_hex("a"), "0cc175b9c0f1b6a831c399e269772661");
  EXPECT_EQ(md5_hex("abc"), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(md5_hex("message digest"), "f96b697d7cb7938d525a2f31aaf161d0");
  EXPECT_EQ(md5_hex("abcdefghijklmnopqrstuvwxyz"), "c3fcd3d76192e4007dfb496cca67e13b");
  EXPECT_EQ(md5_hex("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"),
            "d174ab98d277d9f5a5611c2c9f419d9f");
  EXPECT_EQ(md5_hex("1234567890123456789012345678901234567890123456789012345678901234567890123456"
                    "7890"),
            "57edf4a22be3c955ac49da2e2107b67a");
  // Lengths around the 56-byte padding boundary.
  EXPECT_EQ(md5_hex(std::string(55, 'x')), "04364420e25c512fd958a70738aa8f72");
  EXPECT_EQ(md5_hex(std::string(56, 'x')), "668a72d5ba17f08e62dabcafad6db14b");
  EXPECT_EQ(md5_hex(std::string(64, 'x')), "c1bb4f81d892b2d57947682aeb252456");
}

TEST(PythonJson, DumpsLikePythonJsonDumpsIndent4) {
  MEGATRON_REQUIRE_REFERENCE();
  for (const auto& c : ref.manifest()["json"]) {
    const auto value = nlohmann::ordered_json::parse(
        read_file_bytes(ref.path("json/" + c["value"].get<std::string>())));
    const std::string text = testing::to_pyjson(value).dumps(4);
    EXPECT_EQ(text, read_file_bytes(ref.path("json/" + c["dumps"].get<std::string>())));
    EXPECT_EQ(md5_hex(text), c["md5"].get<std::string>());
  }
}

TEST(PythonJson, EscapesBytesThatAreNotUtf8AsSurrogates) {
  EXPECT_EQ(python_json_string("a\xff"
                               "b"),
            "\"a\\udcffb\"");
  EXPECT_EQ(python_json_string("\x7f"), "\"\\u007f\"");
}

}  // namespace
}  // namespace megatron::data
