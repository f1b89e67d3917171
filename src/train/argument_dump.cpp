// Megatron's start-up text (spec 5.3): the world-size line and the argument dump, each value as
// Python's str() would print it (None, True/False, float repr, ['a', 'b']).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <type_traits>

#include "argument_fields.h"
#include "megatron/core/strings.h"

namespace megatron::train {

namespace {

using detail::DumpStyle;
using detail::FieldSpec;


std::string python_str(const std::string& value) { return value; }
std::string python_str(bool value) { return value ? "True" : "False"; }
std::string python_str(double value) { return python_float_repr(value); }
template <typename T>
  requires std::is_integral_v<T> && (!std::is_same_v<T, bool>)
std::string python_str(T value) {
  return std::to_string(value);
}
template <typename E>
  requires std::is_enum_v<E>
std::string python_str(E value) {
  return std::string(enum_name(value));
}
// --attention-backend holds a Python enum (AttnBackend) in Megatron: str() prints its class.
std::string python_str(AttentionBackend value) { return "AttnBackend." + std::string(enum_name(value)); }
std::string python_str(const std::vector<std::string>& values) { return python_list_str(values); }
template <typename T>
std::string python_str(const std::optional<T>& value) {
  return value ? python_str(*value) : "None";
}

// The float fields whose argparse default is a Python int (2**32, 1000): printed without ".0".
std::map<std::string_view, double> int_defaults() {
  std::map<std::string_view, double> defaults;
  const Arguments fresh;
  detail::for_each_field(fresh, [&](const FieldSpec& spec, const auto& value) {
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, double>) {
      if (spec.dump == DumpStyle::kIntWhenDefault) defaults[spec.dest] = value;
    }
  });
  return defaults;
}

}  // namespace

std::string format_world_size_line(const Arguments& args) {
  const auto& p = args.parallel;
  return "using world size: " + std::to_string(p.world_size) + ", data-parallel size: " + std::to_string(p.data_parallel_size) +
         ", context-parallel size: " + std::to_string(p.context_parallel_size) +
         ", hierarchical context-parallel sizes: None, tensor-model-parallel size: " +
         std::to_string(p.tensor_model_parallel_size) + ", pipeline-model-parallel size: " +
         std::to_string(p.pipeline_model_parallel_size);
}

std::vector<std::pair<std::string_view, std::string>> detail::dump_values(const Arguments& args) {
  const auto defaults = int_defaults();
  std::vector<std::pair<std::string_view, std::string>> values;
  detail::for_each_field(args, [&](const FieldSpec& spec, const auto& value) {
    using T = std::decay_t<decltype(value)>;
    std::string text;
    if constexpr (std::is_same_v<T, bool>) {
      text = spec.dump == DumpStyle::kNoneWhenFalse && !value ? "None" : python_str(value);
    } else if constexpr (std::is_same_v<T, double>) {
      const auto it = defaults.find(spec.dest);
      const bool as_int = it != defaults.end() && it->second == value && std::abs(value) < 9e18;
      text = as_int ? std::to_string(static_cast<std::int64_t>(value)) : python_str(value);
    } else {
      text = python_str(value);
    }
    values.emplace_back(spec.dest, std::move(text));
  });
  return values;
}

std::string format_argument_dump(const Arguments& args) {
  std::vector<std::string> lines;
  for (const auto& [name, text] : detail::dump_values(args)) {
    const std::size_t dots = name.size() < 48 ? 48 - name.size() : 0;
    lines.push_back("  " + std::string(name) + " " + std::string(dots, '.') + " " + text);
  }
  auto lower = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
  };
  std::stable_sort(lines.begin(), lines.end(), [&](const std::string& x, const std::string& y) { return lower(x) < lower(y); });
  std::string out = "------------------------ arguments ------------------------\n";
  for (const auto& line : lines) out += line + "\n";
  return out + "-------------------- end of arguments ---------------------\n";
}

}  // namespace megatron::train
