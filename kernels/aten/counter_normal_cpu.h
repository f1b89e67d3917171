// The CPU side of the counter-based normal stream (definition in counter_normal.h, arithmetic in
// counter_normal_math.h): values are computed 64 at a time, always for a whole aligned batch
// (elements 64 b .. 64 b + 63), by one function whose every lane runs the same IEEE operations.
#pragma once

#include <cstdint>

namespace megatron::kernels::detail {

inline constexpr int kCounterNormalBatch = 64;

// Writes elements [64 batch, 64 batch + 64) of stream `key`, at std 1, to out[0..63].
void counter_normal_batch(std::uint64_t key, std::uint64_t batch, float* out);

// Writes full-tensor elements [first, first + count) of stream `key`, times std, to out.
void counter_normal_range(float* out, std::uint64_t key, float std, std::uint64_t first, std::int64_t count);

}  // namespace megatron::kernels::detail
