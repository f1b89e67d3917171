// --max-shard-size as HuggingFace's save_pretrained reads max_shard_size
// (transformers.utils.hub.convert_file_size_to_int): a whole number followed by KB/MB/GB (powers of
// ten), KiB/MiB/GiB (powers of two), case-insensitive, except that a lowercase final "b" after a
// decimal unit means bits ("5Gb" is 625,000,000 bytes); and, as here only, a plain byte count.
#pragma once

#include <cstdint>
#include <string_view>

namespace megatron::interop {

// The size in bytes; throws megatron::Error naming the flag for anything else (fractions, inf,
// zero, negative numbers, unknown units, more than 2^64 - 1 bytes).
std::uint64_t parse_shard_size(std::string_view text);

}  // namespace megatron::interop
