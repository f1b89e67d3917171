// Saturating arithmetic on non-negative 64-bit sizes: a result past INT64_MAX stays INT64_MAX,
// which no machine holds. For size estimates made from user flags before anything is allocated,
// where a wrapped product would turn "far too large" into "fits".
#pragma once

#include <cstdint>
#include <limits>

namespace megatron {

inline constexpr std::int64_t kSaturated = std::numeric_limits<std::int64_t>::max();

inline std::int64_t saturating_mul(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  return __builtin_mul_overflow(a, b, &out) ? kSaturated : out;
}

inline std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  return __builtin_add_overflow(a, b, &out) ? kSaturated : out;
}

}  // namespace megatron
