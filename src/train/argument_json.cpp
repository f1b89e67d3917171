// The resolved Arguments as one flat JSON object keyed by argparse dest names (the dump's names),
// written to the run folder and into every checkpoint, and read back with type checks.
// Non-finite floats are written as the strings "inf", "-inf", "nan" (JSON has no such numbers).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <type_traits>

#include "argument_fields.h"
#include "megatron/core/check.h"

namespace megatron::train {

namespace {

using detail::FieldSpec;
using nlohmann::json;

json to_value(const std::string& v) { return v; }
json to_value(bool v) { return v; }
json to_value(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}
template <typename T>
  requires std::is_integral_v<T> && (!std::is_same_v<T, bool>)
json to_value(T v) {
  return v;
}
template <typename E>
  requires std::is_enum_v<E>
json to_value(E v) {
  return std::string(enum_name(v));
}
json to_value(const std::vector<std::string>& v) { return v; }
template <typename T>
json to_value(const std::optional<T>& v) {
  return v ? to_value(*v) : json(nullptr);
}

// Reads one JSON value into a field; returns a description of what was expected on a mismatch.
struct Reader {
  std::string read(const json& j, std::string& field) {
    if (j.is_number_integer()) {  // saved before the flag took text (--moe-layer-freq)
      field = std::to_string(j.get<std::int64_t>());
      return "";
    }
    if (!j.is_string()) return "a string";
    field = j.get<std::string>();
    return "";
  }
  std::string read(const json& j, bool& field) {
    if (!j.is_boolean()) return "true or false";
    field = j.get<bool>();
    return "";
  }
  std::string read(const json& j, double& field) {
    if (j.is_number()) {
      field = j.get<double>();
      return "";
    }
    static const std::map<std::string, double> kSpecial = {{"inf", std::numeric_limits<double>::infinity()},
                                                           {"-inf", -std::numeric_limits<double>::infinity()},
                                                           {"nan", std::numeric_limits<double>::quiet_NaN()}};
    if (j.is_string() && kSpecial.contains(j.get<std::string>())) {
      field = kSpecial.at(j.get<std::string>());
      return "";
    }
    return "a number";
  }
  template <typename T>
    requires std::is_integral_v<T> && (!std::is_same_v<T, bool>)
  std::string read(const json& j, T& field) {
    if (!j.is_number_integer()) return "an integer";
    if (j.is_number_unsigned() ? j.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<T>::max())
                               : (j.get<std::int64_t>() < std::numeric_limits<T>::min() ||
                                  j.get<std::int64_t>() > std::numeric_limits<T>::max())) {
      return "an integer in range";
    }
    field = static_cast<T>(j.get<std::int64_t>());
    return "";
  }
  template <typename E>
    requires std::is_enum_v<E>
  std::string read(const json& j, E& field) {
    if (const auto value = j.is_string() ? parse_enum<E>(j.get<std::string>()) : std::nullopt) {
      field = *value;
      return "";
    }
    return "one of " + quoted_enum_names<E>();
  }
  std::string read(const json& j, std::vector<std::string>& field) {
    if (!j.is_array()) return "a list of strings";
    std::vector<std::string> values;
    for (const auto& item : j) {
      if (!item.is_string()) return "a list of strings";
      values.push_back(item.get<std::string>());
    }
    field = std::move(values);
    return "";
  }
  template <typename T>
  std::string read(const json& j, std::optional<T>& field) {
    if (j.is_null()) {
      field.reset();
      return "";
    }
    T value{};
    std::string expected = read(j, value);
    if (expected.empty()) field = std::move(value);
    return expected.empty() ? "" : "null or " + expected;
  }
};

}  // namespace

std::string to_json(const Arguments& args) {
  json out = json::object();
  detail::for_each_field(args, [&](const FieldSpec& spec, const auto& value) { out[std::string(spec.dest)] = to_value(value); });
  return out.dump(2) + "\n";
}

Arguments from_json(std::string_view text) {
  json in;
  try {
    in = json::parse(text);
  } catch (const json::exception& e) {
    throw_if_problems("invalid arguments JSON", {e.what()});
  }
  std::vector<std::string> problems;
  if (!in.is_object()) throw_if_problems("invalid arguments JSON", {"expected an object of argument names and values"});
  Arguments args;
  std::set<std::string> known;
  detail::for_each_field(args, [&](const FieldSpec& spec, auto& field) {
    const std::string name(spec.dest);
    known.insert(name);
    const auto it = in.find(name);
    if (it == in.end()) return;
    std::string expected = Reader{}.read(*it, field);
    const auto& choices = spec.choices.megatron;
    const auto& ours = spec.choices.implemented;
    if (expected.empty() && !choices.empty() && it->is_string() &&
        std::find(choices.begin(), choices.end(), it->get<std::string>()) == choices.end() &&
        std::find(ours.begin(), ours.end(), it->get<std::string>()) == ours.end()) {
      for (const auto choice : choices) expected += (expected.empty() ? "one of '" : ", '") + std::string(choice) + "'";
    }
    if (!expected.empty()) problems.push_back("'" + name + "': expected " + expected + ", got " + it->dump());
  });
  for (const auto& item : in.items()) {
    if (!known.contains(item.key())) problems.push_back("unknown argument '" + item.key() + "'");
  }
  throw_if_problems("invalid arguments JSON", problems);
  return args;
}

}  // namespace megatron::train
