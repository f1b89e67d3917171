// numpy's RandomState (MT19937) and default_rng (SeedSequence + PCG64) streams, see
// numpy_random.h. Constants and step order follow numpy/random/src/{mt19937,pcg64}/ and
// numpy/random/bit_generator.pyx; the tests compare every stream with numpy's own output.
#include "megatron/data/numpy_random.h"

#include "megatron/core/check.h"

namespace megatron::data {
namespace {

__extension__ typedef unsigned __int128 Uint128;

Uint128 make_uint128(std::uint64_t high, std::uint64_t low) {
  return (static_cast<Uint128>(high) << 64) | low;
}

// PCG_DEFAULT_MULTIPLIER_128.
const Uint128 kPcgMultiplier = make_uint128(2549297995355413924ULL, 4865540595714422341ULL);

// SeedSequence constants (numpy/random/bit_generator.pyx).
constexpr std::uint32_t kInitA = 0x43b0d7e5;
constexpr std::uint32_t kMultA = 0x931e8875;
constexpr std::uint32_t kInitB = 0x8b51f9dd;
constexpr std::uint32_t kMultB = 0x58f38ded;
constexpr std::uint32_t kMixMultL = 0xca01f9dd;
constexpr std::uint32_t kMixMultR = 0x4973f715;
constexpr int kXShift = 16;

std::uint32_t hashmix(std::uint32_t value, std::uint32_t& hash_const) {
  value ^= hash_const;
  hash_const *= kMultA;
  value *= hash_const;
  value ^= value >> kXShift;
  return value;
}

std::uint32_t mix(std::uint32_t x, std::uint32_t y) {
  std::uint32_t result = kMixMultL * x - kMixMultR * y;
  result ^= result >> kXShift;
  return result;
}

std::uint64_t rotate_right(std::uint64_t value, unsigned rot) {
  return (value >> rot) | (value << ((-rot) & 63u));
}

}  // namespace

RandomState::RandomState(std::uint32_t seed) {
  state_[0] = seed;
  for (std::size_t i = 1; i < state_.size(); ++i) {
    state_[i] =
        1812433253U * (state_[i - 1] ^ (state_[i - 1] >> 30)) + static_cast<std::uint32_t>(i);
  }
  position_ = state_.size();
}

void RandomState::regenerate() {
  constexpr std::size_t kN = 624;
  constexpr std::size_t kM = 397;
  const auto twist = [](std::uint32_t upper, std::uint32_t lower, std::uint32_t far) {
    const std::uint32_t y = (upper & 0x80000000U) | (lower & 0x7fffffffU);
    return far ^ (y >> 1) ^ ((y & 1U) != 0 ? 0x9908b0dfU : 0U);
  };
  std::size_t i = 0;
  for (; i < kN - kM; ++i) state_[i] = twist(state_[i], state_[i + 1], state_[i + kM]);
  for (; i < kN - 1; ++i) state_[i] = twist(state_[i], state_[i + 1], state_[i + kM - kN]);
  state_[kN - 1] = twist(state_[kN - 1], state_[0], state_[kM - 1]);
  position_ = 0;
}

template <typename T>
void RandomState::shuffle(std::span<T> values) {
  constexpr std::size_t kAhead = 64;  // a power of two: swap i's partner waits in slot i % kAhead
  const std::size_t n = values.size();
  if (n < 2) return;
  std::array<std::size_t, kAhead> partner{};
  const auto draw = [&](std::size_t i) {
    const auto j = static_cast<std::size_t>(interval(i));
    partner[i % kAhead] = j;
    __builtin_prefetch(&values[j], 1);
  };
  const std::size_t primed_to = n - 1 > kAhead ? n - 1 - kAhead : 0;  // drawn: i > primed_to
  for (std::size_t i = n - 1; i > primed_to; --i) draw(i);
  for (std::size_t i = n - 1; i >= 1; --i) {
    const std::size_t j = partner[i % kAhead];
    if (i > kAhead) draw(i - kAhead);  // numpy's next draw, into the slot just read
    const T tmp = values[j];
    values[j] = values[i];
    values[i] = tmp;
  }
}

template void RandomState::shuffle(std::span<std::int32_t>);
template void RandomState::shuffle(std::span<std::uint32_t>);
template void RandomState::shuffle(std::span<std::int64_t>);
template void RandomState::shuffle(std::span<std::uint64_t>);

SeedSequence::SeedSequence(std::uint64_t entropy) {
  std::vector<std::uint32_t> words;
  if (entropy == 0) words.push_back(0);
  for (std::uint64_t n = entropy; n > 0; n >>= 32) {
    words.push_back(static_cast<std::uint32_t>(n & 0xffffffffULL));
  }
  std::uint32_t hash_const = kInitA;
  for (std::size_t i = 0; i < pool_.size(); ++i) {
    pool_[i] = hashmix(i < words.size() ? words[i] : 0U, hash_const);
  }
  for (std::size_t src = 0; src < pool_.size(); ++src) {
    for (std::size_t dst = 0; dst < pool_.size(); ++dst) {
      if (src != dst) pool_[dst] = mix(pool_[dst], hashmix(pool_[src], hash_const));
    }
  }
  // At most two entropy words, so none is left over for numpy's third mixing phase.
}

std::vector<std::uint32_t> SeedSequence::generate_state_uint32(std::size_t n_words) const {
  std::vector<std::uint32_t> out(n_words);
  std::uint32_t hash_const = kInitB;
  for (std::size_t i = 0; i < n_words; ++i) {
    std::uint32_t value = pool_[i % pool_.size()];
    value ^= hash_const;
    hash_const *= kMultB;
    value *= hash_const;
    value ^= value >> kXShift;
    out[i] = value;
  }
  return out;
}

std::vector<std::uint64_t> SeedSequence::generate_state_uint64(std::size_t n_words) const {
  const std::vector<std::uint32_t> words = generate_state_uint32(2 * n_words);
  std::vector<std::uint64_t> out(n_words);
  for (std::size_t i = 0; i < n_words; ++i) {
    out[i] = (static_cast<std::uint64_t>(words[2 * i + 1]) << 32) | words[2 * i];
  }
  return out;
}

Pcg64::Pcg64(std::uint64_t seed) {
  const std::vector<std::uint64_t> words = SeedSequence(seed).generate_state_uint64(4);
  const Uint128 initial_state = make_uint128(words[0], words[1]);
  const Uint128 sequence = make_uint128(words[2], words[3]);
  const Uint128 increment = (sequence << 1) | 1U;
  increment_high_ = static_cast<std::uint64_t>(increment >> 64);
  increment_low_ = static_cast<std::uint64_t>(increment);
  state_high_ = 0;
  state_low_ = 0;
  step();
  const Uint128 state = make_uint128(state_high_, state_low_) + initial_state;
  state_high_ = static_cast<std::uint64_t>(state >> 64);
  state_low_ = static_cast<std::uint64_t>(state);
  step();
}

void Pcg64::step() {
  const Uint128 state = make_uint128(state_high_, state_low_) * kPcgMultiplier +
                        make_uint128(increment_high_, increment_low_);
  state_high_ = static_cast<std::uint64_t>(state >> 64);
  state_low_ = static_cast<std::uint64_t>(state);
}

std::uint64_t Pcg64::next_uint64() {
  step();
  return rotate_right(state_high_ ^ state_low_, static_cast<unsigned>(state_high_ >> 58));
}

std::uint32_t Pcg64::next_uint32() {
  if (has_uint32_) {
    has_uint32_ = false;
    return uinteger_;
  }
  const std::uint64_t next = next_uint64();
  has_uint32_ = true;
  uinteger_ = static_cast<std::uint32_t>(next >> 32);
  return static_cast<std::uint32_t>(next & 0xffffffffULL);
}

std::vector<std::int32_t> default_rng_integers_int32(std::uint64_t seed, std::int32_t low,
                                                     std::int32_t high, std::size_t size) {
  MEGATRON_CHECK(high > low, "default_rng integers: high (", high, ") must exceed low (", low, ")");
  Pcg64 generator(seed);
  const std::uint32_t range = static_cast<std::uint32_t>(static_cast<std::int64_t>(high) - low - 1);
  std::vector<std::int32_t> out(size);
  for (std::size_t i = 0; i < size; ++i) {
    std::uint32_t value = 0;
    if (range == 0xffffffffU) {
      value = generator.next_uint32();
    } else if (range != 0) {
      // Lemire's nearly divisionless method, as numpy's buffered_bounded_lemire_uint32.
      const std::uint32_t range_excl = range + 1;
      std::uint64_t m = static_cast<std::uint64_t>(generator.next_uint32()) * range_excl;
      std::uint32_t leftover = static_cast<std::uint32_t>(m);
      if (leftover < range_excl) {
        const std::uint32_t threshold = (0xffffffffU - range) % range_excl;
        while (leftover < threshold) {
          m = static_cast<std::uint64_t>(generator.next_uint32()) * range_excl;
          leftover = static_cast<std::uint32_t>(m);
        }
      }
      value = static_cast<std::uint32_t>(m >> 32);
    }
    out[i] = static_cast<std::int32_t>(static_cast<std::uint32_t>(low) + value);
  }
  return out;
}

}  // namespace megatron::data
