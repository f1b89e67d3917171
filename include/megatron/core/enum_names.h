// An enum's spellings: each module that owns a choice (the model's position embedding, the
// scheduler's decay style, ...) declares one table of {value, Megatron's name} next to the enum and
// an `enum_names(E)` overload that returns it; the flag parser, the argument dump and every JSON
// round trip look names up here, so a choice is spelt in exactly one place.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace megatron {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

// Megatron's spelling of `value`; empty when the value has no name (e.g. an enum's "none", which
// Megatron spells None).
template <typename E>
std::string_view enum_name(E value) {
  for (const auto& entry : enum_names(E{})) {
    if (entry.value == value) return entry.name;
  }
  return {};
}

// The value spelt `name`, if any.
template <typename E>
std::optional<E> parse_enum(std::string_view name) {
  for (const auto& entry : enum_names(E{})) {
    if (entry.name == name) return entry.value;
  }
  return std::nullopt;
}

// "'a', 'b', 'c'": the names as argparse lists choices.
template <typename E>
std::string quoted_enum_names() {
  std::string out;
  for (const auto& entry : enum_names(E{})) out += (out.empty() ? "'" : ", '") + std::string(entry.name) + "'";
  return out;
}

}  // namespace megatron
