// DType table (spec 1.2): element sizes, numpy names and the one-byte codes of the .idx header.
// Code 7 is float32 as in current Megatron (legacy v2.6 read it as float64).
#include "megatron/data/dtype.h"

#include "megatron/core/check.h"

namespace megatron::data {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
    case DType::kInt8:
      return 1;
    case DType::kInt16:
    case DType::kUInt16:
      return 2;
    case DType::kInt32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
    case DType::kFloat64:
      return 8;
  }
  MEGATRON_FAIL("internal error: unknown dtype code ", static_cast<int>(dtype));
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
      return "uint8";
    case DType::kInt8:
      return "int8";
    case DType::kInt16:
      return "int16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kFloat64:
      return "float64";
    case DType::kFloat32:
      return "float32";
    case DType::kUInt16:
      return "uint16";
  }
  return "unknown";
}

std::optional<DType> dtype_from_code(std::uint8_t code) {
  if (code < 1 || code > 8) return std::nullopt;
  return static_cast<DType>(code);
}

DType optimal_token_dtype(std::size_t vocab_size) {
  return vocab_size < 65500 ? DType::kUInt16 : DType::kInt32;
}

}  // namespace megatron::data
