// A JSON value printed exactly as Python's json.dumps(value, indent=4) prints it (ensure_ascii,
// float repr, insertion-ordered dicts as OrderedDict), for the dataset cache descriptions whose
// MD5 names Megatron's cache files (spec 4.8). Writing only; no parser.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace megatron::data {

class PyJson {
 public:
  using List = std::vector<PyJson>;
  using Dict = std::vector<std::pair<std::string, PyJson>>;  // keys in insertion order

  PyJson() = default;  // None -> null
  PyJson(std::nullptr_t) {}
  PyJson(bool value) : value_(value) {}
  template <typename T,
            std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  PyJson(T value) : value_(static_cast<std::int64_t>(value)) {}
  PyJson(double value) : value_(value) {}
  PyJson(std::string value) : value_(std::move(value)) {}
  PyJson(const char* value) : value_(std::string(value)) {}
  PyJson(List values) : value_(std::move(values)) {}

  static PyJson dict() {
    PyJson out;
    out.value_ = Dict{};
    return out;
  }

  // Appends key: value to a dict (keys are not deduplicated; callers pass distinct keys).
  PyJson& set(std::string key, PyJson value);
  // Appends to a list.
  PyJson& push_back(PyJson value);

  bool is_null() const { return std::holds_alternative<std::monostate>(value_); }
  bool is_dict() const { return std::holds_alternative<Dict>(value_); }
  const Dict& as_dict() const { return std::get<Dict>(value_); }

  // json.dumps(value, indent=indent): separators ',' and ': ', one item per line, empty
  // containers as [] and {}; non-ASCII escaped as \uXXXX (bytes that are not UTF-8 as the
  // surrogate escapes Python's os.fsdecode gives them).
  std::string dumps(int indent = 4) const;

 private:
  void dump(std::string& out, int indent, int depth) const;

  std::variant<std::monostate, bool, std::int64_t, double, std::string, List, Dict> value_;
};

// A Python string literal as json.dumps writes it (quotes included).
std::string python_json_string(const std::string& utf8);

}  // namespace megatron::data
