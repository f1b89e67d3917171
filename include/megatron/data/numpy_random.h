// Bit-exact copies of the two numpy random streams Megatron's datasets draw from (spec 4.4,
// 4.10): the legacy numpy.random.RandomState(seed) (MT19937, masked-rejection bounded draws,
// shuffle of 1-D arrays) and numpy.random.default_rng(seed).integers(..., dtype=int32)
// (SeedSequence -> PCG64 XSL-RR, Lemire bounded draws over buffered 32-bit halves).
// Only what the datasets use is implemented: no floats, no other distributions.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace megatron::data {

// numpy.random.RandomState(seed) for an integer seed in [0, 2^32): MT19937 seeded with
// init_genrand, the same stream as std::mt19937(seed).
class RandomState {
 public:
  explicit RandomState(std::uint32_t seed);

  std::uint32_t next_uint32();
  // Two 32-bit outputs, the first in the high half (numpy's mt19937_next64).
  std::uint64_t next_uint64();

  // numpy's legacy random_interval(max): a value in [0, max] by masked rejection (32-bit draws
  // when max < 2^32, else 64-bit draws). Also what RandomState.randint(0, max + 1,
  // dtype=int64) draws per element.
  std::uint64_t interval(std::uint64_t max);

  // RandomState.shuffle(a) for a 1-D array: for i = n-1 down to 1, swap a[i] and
  // a[interval(i)].
  template <typename T>
  void shuffle(std::span<T> values) {
    for (std::size_t i = values.size(); i-- > 1;) {
      const std::size_t j = static_cast<std::size_t>(interval(i));
      const T tmp = values[j];
      values[j] = values[i];
      values[i] = tmp;
    }
  }

 private:
  void regenerate();

  std::array<std::uint32_t, 624> state_{};
  std::size_t position_ = 624;
};

// numpy.random.SeedSequence(entropy) with no spawn key and pool size 4; entropy is a
// non-negative integer (split into 32-bit words, low word first, as numpy does).
class SeedSequence {
 public:
  explicit SeedSequence(std::uint64_t entropy);
  // generate_state(n_words, dtype=uint32).
  std::vector<std::uint32_t> generate_state_uint32(std::size_t n_words) const;
  // generate_state(n_words, dtype=uint64): pairs of 32-bit words, low word first.
  std::vector<std::uint64_t> generate_state_uint64(std::size_t n_words) const;

 private:
  std::array<std::uint32_t, 4> pool_{};
};

// numpy.random.PCG64(seed): 128-bit LCG with XSL-RR output, seeded through SeedSequence.
class Pcg64 {
 public:
  explicit Pcg64(std::uint64_t seed);

  std::uint64_t next_uint64();
  // numpy's buffered 32-bit draw: the low half of a fresh 64-bit output, then its high half.
  std::uint32_t next_uint32();

 private:
  void step();

  // 128-bit state and increment as (high, low) words.
  std::uint64_t state_high_ = 0;
  std::uint64_t state_low_ = 0;
  std::uint64_t increment_high_ = 0;
  std::uint64_t increment_low_ = 0;
  bool has_uint32_ = false;
  std::uint32_t uinteger_ = 0;
};

// numpy.random.default_rng(seed).integers(low, high, size, dtype=numpy.int32): values in
// [low, high), high > low, both within int32.
std::vector<std::int32_t> default_rng_integers_int32(std::uint64_t seed, std::int32_t low,
                                                     std::int32_t high, std::size_t size);

}  // namespace megatron::data
