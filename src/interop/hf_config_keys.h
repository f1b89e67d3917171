// Typed reads of a HuggingFace config.json's keys (private to src/interop), shared by every
// family's reader: transformers' None (absent or null) takes the fallback; the wrong type or a
// value out of range is a problem naming the key, and reading goes on.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "megatron/core/check.h"

namespace megatron::interop::detail {

using Problems = std::vector<std::string>;

// A value of the wrong type or out of range reads as the fallback (0 for a required integer).
class HfConfigKeys {
 public:
  HfConfigKeys(const nlohmann::json& j, std::vector<std::string>& problems) : j_(j), problems_(problems) {}

  bool given(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  // A whole number in [low, high]. Without a fallback the key is required. A fallback derived from
  // other keys is checked against the range too (it becomes one of Megatron's int sizes).
  std::int64_t integer(const char* key, std::optional<std::int64_t> fallback, std::int64_t low = 1,
                       std::int64_t high = std::numeric_limits<int>::max()) {
    const std::string range = str_cat("expected a whole number from ", low, " to ", high);
    if (!given(key)) {
      if (!fallback) {
        problems_.push_back(str_cat(key, ": missing; ", range));
        return 0;
      }
      if (*fallback < low || *fallback > high) {
        problems_.push_back(str_cat(key, ": not given, and its default from the other sizes is ", *fallback, "; ", range));
        return 0;
      }
      return *fallback;
    }
    const nlohmann::json& v = j_.at(key);
    // JSON's integers only: 2.7, 4.0 and 1e12 are floats in Python too, and transformers' sizes are ints.
    const bool in_range = v.is_number_unsigned()  ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(high) &&
                                                       static_cast<std::int64_t>(v.get<std::uint64_t>()) >= low
                          : v.is_number_integer() ? v.get<std::int64_t>() >= low && v.get<std::int64_t>() <= high
                                                  : false;
    if (!in_range) {
      problems_.push_back(str_cat(key, " is ", v.dump(), "; ", range));
      return 0;
    }
    return v.get<std::int64_t>();
  }

  double real(const char* key, double fallback) {
    if (!given(key)) return fallback;
    const nlohmann::json& v = j_.at(key);
    if (v.is_number()) return v.get<double>();
    problems_.push_back(str_cat(key, " is ", v.dump(), "; expected a number"));
    return fallback;
  }

  bool boolean(const char* key, bool fallback) {
    if (!given(key)) return fallback;
    const nlohmann::json& v = j_.at(key);
    if (v.is_boolean()) return v.get<bool>();
    problems_.push_back(str_cat(key, " is ", v.dump(), "; expected true or false"));
    return fallback;
  }

  // A list of whole numbers (empty when absent); a value that is not one is a problem.
  std::vector<std::int64_t> integers(const char* key) {
    std::vector<std::int64_t> out;
    if (!given(key)) return out;
    const nlohmann::json& v = j_.at(key);
    for (std::size_t i = 0; v.is_array() && i < v.size(); ++i) {
      if (!v[i].is_number_integer()) break;
      out.push_back(v[i].get<std::int64_t>());
    }
    if (!v.is_array() || out.size() != v.size()) {
      problems_.push_back(str_cat(key, " is ", v.dump(), "; expected a list of whole numbers"));
      out.clear();
    }
    return out;
  }

  std::string text(const char* key, const std::string& fallback) {
    if (!given(key)) return fallback;
    const nlohmann::json& v = j_.at(key);
    if (v.is_string()) return v.get<std::string>();
    problems_.push_back(str_cat(key, " is ", v.dump(), "; expected a string"));
    return fallback;
  }

 private:
  const nlohmann::json& j_;
  std::vector<std::string>& problems_;
};

}  // namespace megatron::interop::detail
