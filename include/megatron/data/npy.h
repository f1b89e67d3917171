// NumPy's .npy format (versions 1.0-3.0 read, 1.0 written), for the dataset index caches
// (spec 4.8). Reading maps the file and parses the header dictionary (its size is not assumed);
// writing produces the bytes numpy.save writes (64-byte aligned header, the growth padding).
// Little-endian, C-order, 1-D and 2-D integer/float arrays only; no object arrays, no Fortran
// order, no big-endian data.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "megatron/core/check.h"
#include "megatron/core/file_io.h"

namespace megatron::data {

enum class NpyDType : std::uint8_t {
  kInt8,
  kUInt8,
  kInt16,
  kUInt16,
  kInt32,
  kUInt32,
  kInt64,
  kUInt64,
  kFloat32,
  kFloat64
};

std::size_t npy_dtype_size(NpyDType dtype);
const char* npy_dtype_descr(NpyDType dtype);  // numpy's descr string: "<i4", "|u1", ...
const char* npy_dtype_name(NpyDType dtype);   // "int32", "uint32", ...

// The NpyDType of a C++ element type (compile error for types without one).
template <typename T>
constexpr NpyDType npy_dtype_of() {
  if constexpr (std::is_same_v<T, std::int8_t>) {
    return NpyDType::kInt8;
  } else if constexpr (std::is_same_v<T, std::uint8_t>) {
    return NpyDType::kUInt8;
  } else if constexpr (std::is_same_v<T, std::int16_t>) {
    return NpyDType::kInt16;
  } else if constexpr (std::is_same_v<T, std::uint16_t>) {
    return NpyDType::kUInt16;
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    return NpyDType::kInt32;
  } else if constexpr (std::is_same_v<T, std::uint32_t>) {
    return NpyDType::kUInt32;
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    return NpyDType::kInt64;
  } else if constexpr (std::is_same_v<T, std::uint64_t>) {
    return NpyDType::kUInt64;
  } else if constexpr (std::is_same_v<T, float>) {
    return NpyDType::kFloat32;
  } else {
    static_assert(std::is_same_v<T, double>, "no .npy dtype for this type");
    return NpyDType::kFloat64;
  }
}

// A read-only .npy array: the file is mapped and the data viewed in place (copied only when
// the header leaves it misaligned for its element type).
class NpyArray {
 public:
  NpyArray() = default;
  // Maps and validates `path`. Throws megatron::Error naming the file and the problem: not an
  // .npy file, unsupported version/dtype/order, a malformed header, or a size that disagrees
  // with the shape (truncated or trailing bytes).
  static NpyArray map(const std::string& path);

  const std::string& path() const { return file_.path(); }
  NpyDType dtype() const { return dtype_; }
  const std::vector<std::uint64_t>& shape() const { return shape_; }
  std::uint64_t size() const { return count_; }  // number of elements

  // The first element's bytes (product(shape) elements of dtype()).
  const void* raw_data() const { return data_; }

  // The elements as T; throws when T is not the file's dtype.
  template <typename T>
  std::span<const T> values() const {
    MEGATRON_CHECK(npy_dtype_of<T>() == dtype_, path(), ": expected ",
                   npy_dtype_name(npy_dtype_of<T>()), " elements, the file holds ",
                   npy_dtype_name(dtype_));
    return {static_cast<const T*>(data_), static_cast<std::size_t>(count_)};
  }

 private:
  MappedFile file_;
  std::vector<std::uint64_t> copy_;  // backing store when the mapped data is misaligned
  const void* data_ = nullptr;
  NpyDType dtype_ = NpyDType::kInt32;
  std::vector<std::uint64_t> shape_;
  std::uint64_t count_ = 0;
};

// The header numpy.save writes (format 1.0) for a C-order array of this dtype and shape: magic,
// version, length, the dict text, the growth padding, spaces to a multiple of 64 bytes, '\n'.
std::string npy_header(NpyDType dtype, std::span<const std::uint64_t> shape);

// Writes header and data into `file` (not committed, so a group of files can be published
// together). `data` holds product(shape) elements of `dtype`.
void write_npy(AtomicFile& file, NpyDType dtype, std::span<const std::uint64_t> shape,
               const void* data);

// One .npy file written atomically (temporary name, fsync, rename).
template <typename T>
void save_npy(const std::string& path, std::span<const T> values,
              std::vector<std::uint64_t> shape = {}) {
  if (shape.empty()) shape = {values.size()};
  AtomicFile file(path);
  write_npy(file, npy_dtype_of<T>(), shape, values.data());
  file.commit();
}

// An index array (document / sample / shuffle / blending index) either built in memory or mapped
// from a cache file. Copies share the storage.
class IndexArray {
 public:
  IndexArray() = default;

  // Takes ownership of `values`; `shape` defaults to 1-D.
  template <typename T>
  static IndexArray from_vector(std::vector<T> values, std::vector<std::uint64_t> shape = {}) {
    IndexArray array;
    if (shape.empty()) shape = {values.size()};
    auto owner = std::make_shared<std::vector<T>>(std::move(values));
    array.data_ = owner->data();
    array.count_ = owner->size();
    array.owner_ = std::move(owner);
    array.dtype_ = npy_dtype_of<T>();
    array.shape_ = std::move(shape);
    return array;
  }
  static IndexArray from_npy(NpyArray array);

  NpyDType dtype() const { return dtype_; }
  const std::vector<std::uint64_t>& shape() const { return shape_; }
  std::uint64_t size() const { return count_; }
  bool mapped() const { return mapped_; }

  // Flat element i widened to int64 (uint64 values above INT64_MAX are not supported).
  std::int64_t at(std::uint64_t i) const;

  template <typename T>
  std::span<const T> values() const {
    MEGATRON_CHECK(npy_dtype_of<T>() == dtype_, "index array holds ", npy_dtype_name(dtype_),
                   ", not ", npy_dtype_name(npy_dtype_of<T>()));
    return {static_cast<const T*>(data_), static_cast<std::size_t>(count_)};
  }

  // Header and data into `file` (not committed).
  void write(AtomicFile& file) const { write_npy(file, dtype_, shape_, data_); }

 private:
  std::shared_ptr<const void> owner_;
  const void* data_ = nullptr;
  NpyDType dtype_ = NpyDType::kInt32;
  std::vector<std::uint64_t> shape_;
  std::uint64_t count_ = 0;
  bool mapped_ = false;
};

}  // namespace megatron::data
