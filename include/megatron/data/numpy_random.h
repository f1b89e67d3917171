// Bit-exact copies of the two numpy random streams Megatron's datasets draw from (spec 4.4,
// 4.10): the legacy numpy.random.RandomState(seed) (MT19937, masked-rejection bounded draws,
// shuffle of 1-D arrays) and numpy.random.default_rng(seed).integers(..., dtype=int32)
// (SeedSequence -> PCG64 XSL-RR, Lemire bounded draws over buffered 32-bit halves).
// Only what the datasets use is implemented: no floats, no other distributions.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <span>
#include <vector>

namespace megatron::data {

// numpy.random.RandomState(seed) for an integer seed in [0, 2^32): MT19937 seeded with
// init_genrand, the same stream as std::mt19937(seed).
class RandomState {
 public:
  explicit RandomState(std::uint32_t seed);

  std::uint32_t next_uint32() {
    if (position_ >= state_.size()) regenerate();
    return temper(state_[position_++]);
  }
  // Two 32-bit outputs, the first in the high half (numpy's mt19937_next64).
  std::uint64_t next_uint64() {
    const std::uint64_t high = next_uint32();
    return (high << 32) | next_uint32();
  }

  // numpy's legacy random_interval(max): a value in [0, max] by masked rejection (32-bit draws
  // when max < 2^32, else 64-bit draws). Also what RandomState.randint(0, max + 1,
  // dtype=int64) draws per element.
  std::uint64_t interval(std::uint64_t max) {
    if (max == 0) return 0;
    const std::uint64_t mask = ~std::uint64_t{0} >> std::countl_zero(max);
    std::uint64_t value = 0;
    if (max <= 0xffffffffULL) {
      while ((value = (next_uint32() & mask)) > max) {
      }
    } else {
      while ((value = (next_uint64() & mask)) > max) {
      }
    }
    return value;
  }

  // RandomState.shuffle(a) for a 1-D array: for i = n-1 down to 1, swap a[i] and
  // a[interval(i)]. The same draws in the same order, each swap's far element prefetched
  // dozens of swaps ahead: on arrays larger than the caches a shuffle is bound by memory latency,
  // not by the generator (instantiated for int32, uint32, int64 and uint64).
  template <typename T>
  void shuffle(std::span<T> values);

 private:
  void regenerate();
  static std::uint32_t temper(std::uint32_t y) {
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    return y ^ (y >> 18);
  }

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
