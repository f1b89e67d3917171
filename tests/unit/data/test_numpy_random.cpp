// RandomState (MT19937, bounded draws, shuffle), SeedSequence, PCG64 and default_rng integers
// against the streams numpy itself produced (gpt_dataset_reference.py, random/).
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "megatron/data/numpy_random.h"
#include "reference_data.h"

namespace megatron::data {
namespace {

using testing::ReferenceData;

template <typename T>
std::vector<T> load(const ReferenceData& ref, const std::string& name) {
  const NpyArray array = NpyArray::map(ref.path("random/" + name));
  const std::span<const T> values = array.values<T>();
  return {values.begin(), values.end()};
}

TEST(RandomState, RawDrawsMatchStdMt19937) {
  RandomState random(5489);
  std::mt19937 reference(5489);
  for (int i = 0; i < 5000; ++i) ASSERT_EQ(random.next_uint32(), reference()) << "draw " << i;
}

TEST(RandomState, RawDrawsMatchNumpy) {
  MEGATRON_REQUIRE_REFERENCE();
  for (const auto& seed : ref.manifest()["random"]["mt_seeds"]) {
    const auto expected = load<std::uint32_t>(ref, "mt_raw_" + seed.dump() + ".npy");
    RandomState random(seed.get<std::uint32_t>());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      ASSERT_EQ(random.next_uint32(), expected[i]) << "seed " << seed << " draw " << i;
    }
  }
}

TEST(RandomState, BoundedDrawsMatchNumpyIncluding64BitPath) {
  MEGATRON_REQUIRE_REFERENCE();
  for (const auto& seed : ref.manifest()["random"]["mt_seeds"]) {
    const auto expected = load<std::int64_t>(ref, "mt_interval_" + seed.dump() + ".npy");
    RandomState random(seed.get<std::uint32_t>());
    std::vector<std::uint64_t> maxima = {1, 2, 3, 7, 1000, 1ULL << 31, (1ULL << 32) - 2};
    maxima.resize(7 + 500, (1ULL << 40) - 1);
    maxima.resize(7 + 1000, 1ULL << 32);
    maxima.resize(7 + 1500, (1ULL << 33) + 4);
    ASSERT_EQ(expected.size(), maxima.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      ASSERT_EQ(random.interval(maxima[i]), static_cast<std::uint64_t>(expected[i]))
          << "seed " << seed << " draw " << i << " max " << maxima[i];
    }
  }
}

TEST(RandomState, ShufflesOfEverySizeUpTo1000MatchNumpy) {
  MEGATRON_REQUIRE_REFERENCE();
  const auto expected = load<std::int32_t>(ref, "shuffles_int32.npy");
  RandomState random(ref.manifest()["random"]["shuffle_seed"].get<std::uint32_t>());
  std::size_t at = 0;
  for (int n = 1; n <= 1000; ++n) {
    std::vector<std::int32_t> values(static_cast<std::size_t>(n));
    std::iota(values.begin(), values.end(), 0);
    random.shuffle(std::span<std::int32_t>(values));
    for (int i = 0; i < n; ++i, ++at) ASSERT_EQ(values[i], expected[at]) << "size " << n;
  }
  EXPECT_EQ(at, expected.size());
}

TEST(RandomState, ShufflesOfUint32AndInt64ArraysMatchNumpy) {
  MEGATRON_REQUIRE_REFERENCE();
  std::vector<std::uint32_t> a(100000);
  std::iota(a.begin(), a.end(), 0U);
  RandomState(5).shuffle(std::span<std::uint32_t>(a));
  EXPECT_EQ(a, load<std::uint32_t>(ref, "shuffle_uint32.npy"));
  std::vector<std::int64_t> b(100000);
  std::iota(b.begin(), b.end(), 0);
  RandomState(5).shuffle(std::span<std::int64_t>(b));
  EXPECT_EQ(b, load<std::int64_t>(ref, "shuffle_int64.npy"));
}

TEST(SeedSequence, GeneratedStateMatchesNumpy) {
  MEGATRON_REQUIRE_REFERENCE();
  for (const auto& seed : ref.manifest()["random"]["pcg_seeds"]) {
    EXPECT_EQ(SeedSequence(seed.get<std::uint64_t>()).generate_state_uint32(8),
              load<std::uint32_t>(ref, "seedseq_" + seed.dump() + ".npy"))
        << "seed " << seed;
  }
}

TEST(Pcg64, RawOutputsMatchNumpy) {
  MEGATRON_REQUIRE_REFERENCE();
  for (const auto& seed : ref.manifest()["random"]["pcg_seeds"]) {
    const auto expected = load<std::uint64_t>(ref, "pcg64_" + seed.dump() + ".npy");
    Pcg64 generator(seed.get<std::uint64_t>());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      ASSERT_EQ(generator.next_uint64(), expected[i]) << "seed " << seed << " output " << i;
    }
  }
}

TEST(Pcg64, Buffered32BitDrawsAreLowThenHighHalf) {
  Pcg64 a(7), b(7);
  for (int i = 0; i < 100; ++i) {
    const std::uint64_t full = a.next_uint64();
    EXPECT_EQ(b.next_uint32(), static_cast<std::uint32_t>(full));
    EXPECT_EQ(b.next_uint32(), static_cast<std::uint32_t>(full >> 32));
  }
}

TEST(DefaultRng, Int32IntegersMatchNumpy) {
  MEGATRON_REQUIRE_REFERENCE();
  for (const auto& c : ref.manifest()["random"]["default_rng"]) {
    EXPECT_EQ(
        default_rng_integers_int32(c["seed"].get<std::uint64_t>(), c["low"].get<std::int32_t>(),
                                   c["high"].get<std::int32_t>(), 1000),
        load<std::int32_t>(ref, c["file"].get<std::string>()))
        << c.dump();
  }
}

TEST(DefaultRng, RejectsAnEmptyRange) {
  const std::string message = testing::error_of([] { default_rng_integers_int32(0, 5, 5, 3); });
  testing::expect_contains(message, {"high (5) must exceed low (5)"});
}

}  // namespace
}  // namespace megatron::data
