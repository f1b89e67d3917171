// UnalignedArray<T>: a read-only view of little-endian T values at any byte address. The .idx
// arrays start at byte 34 of a mapped file, so T* access would be misaligned; elements are read
// with memcpy (a plain load on x86 and ARM64), and the view iterates like a span of values.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <ranges>
#include <type_traits>

namespace megatron::data {

template <typename T>
class UnalignedArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  // A random access iterator whose reference is a T value (elements cannot be written).
  class iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using iterator_concept = std::random_access_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using reference = T;
    using pointer = void;

    iterator() = default;
    explicit iterator(const std::uint8_t* at) : at_(at) {}

    T operator*() const { return load(at_); }
    T operator[](difference_type n) const { return load(at_ + n * kSize); }
    iterator& operator++() { at_ += kSize; return *this; }
    iterator operator++(int) { iterator old = *this; at_ += kSize; return old; }
    iterator& operator--() { at_ -= kSize; return *this; }
    iterator operator--(int) { iterator old = *this; at_ -= kSize; return old; }
    iterator& operator+=(difference_type n) { at_ += n * kSize; return *this; }
    iterator& operator-=(difference_type n) { at_ -= n * kSize; return *this; }
    friend iterator operator+(iterator it, difference_type n) { return it += n; }
    friend iterator operator+(difference_type n, iterator it) { return it += n; }
    friend iterator operator-(iterator it, difference_type n) { return it -= n; }
    friend difference_type operator-(iterator a, iterator b) { return (a.at_ - b.at_) / kSize; }
    friend bool operator==(iterator a, iterator b) { return a.at_ == b.at_; }
    friend std::strong_ordering operator<=>(iterator a, iterator b) {
      return std::compare_three_way{}(a.at_, b.at_);
    }

   private:
    const std::uint8_t* at_ = nullptr;
  };
  using value_type = T;
  using const_iterator = iterator;

  UnalignedArray() = default;
  // `size` values starting at byte `bytes`, at any alignment.
  static UnalignedArray from_bytes(const std::uint8_t* bytes, std::size_t size) {
    UnalignedArray out;
    out.bytes_ = bytes;
    out.size_ = size;
    return out;
  }
  // `size` values at `values` (aligned, owned elsewhere).
  UnalignedArray(const T* values, std::size_t size)
      : bytes_(reinterpret_cast<const std::uint8_t*>(values)), size_(size) {}
  // A view of contiguous, aligned values (a vector or span of T) owned elsewhere.
  template <std::ranges::contiguous_range R>
    requires std::is_same_v<std::remove_cv_t<std::ranges::range_value_t<R>>, T>
  UnalignedArray(const R& values)  // NOLINT(google-explicit-constructor): span-like
      : bytes_(reinterpret_cast<const std::uint8_t*>(std::ranges::data(values))),
        size_(std::ranges::size(values)) {}

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T operator[](std::size_t i) const { return load(bytes_ + i * kSize); }
  T front() const { return (*this)[0]; }
  T back() const { return (*this)[size_ - 1]; }
  iterator begin() const { return iterator(bytes_); }
  iterator end() const { return iterator(bytes_ + size_ * kSize); }
  // Elements [offset, offset + count).
  UnalignedArray subspan(std::size_t offset, std::size_t count) const {
    return from_bytes(bytes_ + offset * kSize, count);
  }
  // The first byte of the array (for copying it whole).
  const std::uint8_t* bytes() const { return bytes_; }
  std::size_t size_bytes() const { return size_ * kSize; }

 private:
  static constexpr std::ptrdiff_t kSize = sizeof(T);
  static T load(const std::uint8_t* at) {
    T value;
    std::memcpy(&value, at, sizeof(T));
    return value;
  }

  const std::uint8_t* bytes_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace megatron::data
