// The arithmetic of the counter-based normal stream (counter_normal.h), shared by the CPU
// (kernels/aten/counter_normal_cpu.cpp) and the CUDA kernel (kernels/counter_normal.cu) so that
// both produce the same bits: Philox4x32-10 by its authors' definition, and ln, sin and cos written
// here in IEEE single-precision operations (+, -, *, /, sqrt, all correctly rounded on both) rather
// than taken from two different libms. Both files are compiled without fused multiply-adds
// (-ffp-contract=off, nvcc -fmad=false), which would round differently.
//
// ln: u = 2^k f with f in [sqrt(1/2), sqrt(2)), ln f = 2 atanh(s) with s = (f - 1) / (f + 1), summed
// to s^9. sin and cos of 2 pi n 2^-24: an exact reduction to the nearest quarter turn, then Taylor
// polynomials on [-pi/4, pi/4]. Each value is within 2 units of 2^-23 max(1, |z|) of the exact
// Box-Muller value (tested in double); glibc's logf and sincosf of the float 2 pi v reach 12.
#pragma once

#include <cstdint>

#include "megatron/kernels/shard_runs.h"  // MEGATRON_HOST_DEVICE

#include <cstring>

namespace megatron::kernels::counter_normal_math {

MEGATRON_HOST_DEVICE inline std::uint32_t bits_of(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t bits;  // std::bit_cast is C++20; the .cu files are C++17
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
#endif
}

MEGATRON_HOST_DEVICE inline float float_of(std::uint32_t x) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(x);
#else
  float value;
  std::memcpy(&value, &x, sizeof value);
  return value;
#endif
}

MEGATRON_HOST_DEVICE inline float correctly_rounded_sqrt(float x) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(x);
#else
  return __builtin_sqrtf(x);  // sqrtss / sqrtps; -fno-math-errno keeps it branch-free
#endif
}

MEGATRON_HOST_DEVICE inline float correctly_rounded_quotient(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);  // whatever -prec-div says
#else
  return a / b;
#endif
}

// One Philox4x32-10 round on the counter (c0, c1, c2, c3) with the round's key (k0, k1).
MEGATRON_HOST_DEVICE inline void philox_round(std::uint32_t& c0, std::uint32_t& c1, std::uint32_t& c2,
                                              std::uint32_t& c3, std::uint32_t k0, std::uint32_t k1) {
  const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * c0;
  const std::uint64_t p1 = std::uint64_t{0xCD9E8D57u} * c2;
  const std::uint32_t next0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1 ^ k0;
  const std::uint32_t next2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3 ^ k1;
  c1 = static_cast<std::uint32_t>(p1);
  c3 = static_cast<std::uint32_t>(p0);
  c0 = next0;
  c2 = next2;
}
inline constexpr std::uint32_t kPhiloxWeyl0 = 0x9E3779B9u;  // the key's bump between rounds
inline constexpr std::uint32_t kPhiloxWeyl1 = 0xBB67AE85u;

// ln(u) for a normal float u in (0, 1].
MEGATRON_HOST_DEVICE inline float log_unit(float u) {
  // Move the mantissa's split point to sqrt(1/2) (0x3f3504f3): u = 2^k f, f in [sqrt(1/2), sqrt(2)).
  const std::uint32_t ix = bits_of(u) + (0x3f800000u - 0x3f3504f3u);
  const float k = static_cast<float>(static_cast<std::int32_t>(ix >> 23) - 127);
  const float f = float_of((ix & 0x007fffffu) + 0x3f3504f3u);
  const float s = correctly_rounded_quotient(f - 1.0f, f + 1.0f);  // |s| <= 0.1716; f - 1 is exact
  const float s2 = s * s;
  const float series = s2 * (1.0f / 3.0f + s2 * (1.0f / 5.0f + s2 * (1.0f / 7.0f + s2 * (1.0f / 9.0f))));
  const float ln_f = (s + s) + (s + s) * series;
  // k ln 2 with ln 2 in two parts: k ln2_hi is exact (|k| <= 24, ln2_hi has 16 significant bits).
  constexpr float kLn2Hi = 0.693145751953125f;
  constexpr float kLn2Lo = 1.42860682030941723212e-6f;
  return k * kLn2Hi + (ln_f + k * kLn2Lo);
}

// sin and cos of 2 pi n 2^-24 for an integer n in [0, 2^24).
MEGATRON_HOST_DEVICE inline void sincos_turns(std::int32_t n, float& sin_out, float& cos_out) {
  const std::int32_t quarter = (n + (1 << 21)) >> 22;                  // nearest quarter turn, 0..4
  const float r = static_cast<float>(n - (quarter << 22)) * 0x1p-24f;  // exact, in [-1/8, 1/8)
  const float x = r * 6.28318530717958647692f;
  const float x2 = x * x;
  const float sin_x =
      x + x * (x2 * (-1.0f / 6.0f + x2 * (1.0f / 120.0f + x2 * (-1.0f / 5040.0f + x2 * (1.0f / 362880.0f)))));
  const float cos_x =
      1.0f + x2 * (-0.5f + x2 * (1.0f / 24.0f + x2 * (-1.0f / 720.0f +
                                                      x2 * (1.0f / 40320.0f + x2 * (-1.0f / 3628800.0f)))));
  // Rotate by the quarter turns: q = 1 gives (cos, -sin), 2 (-sin, -cos), 3 (-cos, sin).
  const std::int32_t q = quarter & 3;
  const float swapped_sin = (q & 1) != 0 ? cos_x : sin_x;
  const float swapped_cos = (q & 1) != 0 ? sin_x : cos_x;
  sin_out = (q & 2) != 0 ? -swapped_sin : swapped_sin;
  cos_out = ((q + 1) & 2) != 0 ? -swapped_cos : swapped_cos;
}

// Box-Muller's radius sqrt(-2 ln u) of the word a: u = ((a >> 8) + 1) 2^-24 in (0, 1].
MEGATRON_HOST_DEVICE inline float box_muller_radius(std::uint32_t a) {
  const float u = static_cast<float>(static_cast<std::int32_t>((a >> 8) + 1u)) * 0x1p-24f;
  return correctly_rounded_sqrt(-2.0f * log_unit(u));
}

}  // namespace megatron::kernels::counter_normal_math
