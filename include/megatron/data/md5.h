// MD5 (RFC 1321), for the names of Megatron's dataset index caches: the file names hold the MD5
// hex digest of the dataset description (spec 4.8). Not for security.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace megatron::data {

// The 16-byte digest of `bytes`.
std::array<std::uint8_t, 16> md5(std::string_view bytes);

// The digest as 32 lowercase hex digits (Python's hashlib.md5(...).hexdigest()).
std::string md5_hex(std::string_view bytes);

}  // namespace megatron::data
