// --max-shard-size read as HuggingFace reads max_shard_size. Expected values are what
// transformers.utils.hub.convert_file_size_to_int returns for the same strings (transformers 4.x,
// run by hand); the refused ones are those it refuses, plus zero and negative sizes.
#include "megatron/interop/hf_shard_size.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace megatron::interop {
namespace {

TEST(HfShardSize, ReadsHuggingFacesUnits) {
  EXPECT_EQ(parse_shard_size("5GB"), 5000000000ull);
  EXPECT_EQ(parse_shard_size("5GiB"), 5368709120ull);
  EXPECT_EQ(parse_shard_size("500MB"), 500000000ull);
  EXPECT_EQ(parse_shard_size("10KiB"), 10240ull);
  EXPECT_EQ(parse_shard_size("5Gb"), 625000000ull);  // bits
  EXPECT_EQ(parse_shard_size("3mb"), 375000ull);
  EXPECT_EQ(parse_shard_size("1GIB"), 1073741824ull);
  EXPECT_EQ(parse_shard_size("7MiB"), 7340032ull);
  EXPECT_EQ(parse_shard_size("1024"), 1024ull);  // a byte count (ours)
  EXPECT_EQ(parse_shard_size("1024B"), 1024ull);
}

TEST(HfShardSize, RefusesWhatIsNotAWholeSize) {
  for (const char* text : {"0.5GB", "0.5", "inf", "1e30", "5TB", "", "GB", "-1GB", "0", "0GB", "1b", " 5GB",
                           "18446744073709551616", "20000000000GB"}) {
    SCOPED_TRACE(text);
    megatron::testing::expect_contains(megatron::testing::error_of([&] { parse_shard_size(text); }),
                                       {std::string("--max-shard-size ") + text + ": "});
  }
}

}  // namespace
}  // namespace megatron::interop
