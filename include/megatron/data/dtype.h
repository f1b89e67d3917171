// Element types of Megatron's indexed datasets and their one-byte codes in the .idx header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace megatron::data {

enum class DType : std::uint8_t {
  kUInt8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat64 = 6,
  kFloat32 = 7,
  kUInt16 = 8,
};

std::size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);                 // numpy's name: "uint16", "int32", ...
std::optional<DType> dtype_from_code(std::uint8_t code);  // nullopt for codes outside 1..8

// What Megatron's preprocessing picks for token ids: uint16 below 65500 tokens, else int32.
DType optimal_token_dtype(std::size_t vocab_size);

// Calls fn(T{}) with T the C++ element type of `dtype` (std::uint16_t for kUInt16, double for
// kFloat64, ...), so loops over tokens are instantiated once per type instead of switching per
// element.
template <typename Fn>
decltype(auto) visit_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kUInt8:
      return fn(std::uint8_t{});
    case DType::kInt8:
      return fn(std::int8_t{});
    case DType::kInt16:
      return fn(std::int16_t{});
    case DType::kInt32:
      return fn(std::int32_t{});
    case DType::kInt64:
      return fn(std::int64_t{});
    case DType::kFloat64:
      return fn(double{});
    case DType::kFloat32:
      return fn(float{});
    case DType::kUInt16:
      break;
  }
  return fn(std::uint16_t{});  // kUInt16; every DType value is one of the eight codes
}

}  // namespace megatron::data
