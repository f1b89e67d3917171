// Reading the command line: CLI11 splits it into flags and values with argparse's semantics (the
// last occurrence wins, negative numbers are values, unknown flags are collected), then each
// value is converted as Python's int()/float() would, collecting every problem.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <type_traits>

#include "argument_fields.h"
#include "megatron_flags.h"
#include "megatron/core/check.h"
#include "megatron/core/cli.h"
#include "megatron/core/strings.h"
#include "resolve_arguments.h"

namespace megatron::train {

namespace {

using detail::Choices;
using detail::FieldSpec;
using detail::FlagKind;
using detail::primary_flag;
using detail::quoted;
using detail::ParseState;

// The values of the last occurrence of a flag, the spelling used and how often it was given.
struct RawValue {
  std::string flag;
  std::vector<std::string> values;
  bool explicit_flag_value = false;  // "--flag=x" on a store_true/store_false flag
  int occurrences = 1;
};

std::string trim(std::string_view text) {
  const auto begin = text.find_first_not_of(" \t\n\r\f\v");
  if (begin == std::string_view::npos) return "";
  const auto end = text.find_last_not_of(" \t\n\r\f\v");
  return std::string(text.substr(begin, end - begin + 1));
}

// Converts one flag's values into its field, reporting problems as argparse words them.
struct ApplyValues {
  const std::map<std::string, RawValue, std::less<>>& raw;
  ParseState& state;

  template <typename T>
  void operator()(const FieldSpec& spec, T& field) {
    const auto it = raw.find(spec.dest);
    if (it == raw.end()) return;
    const RawValue& given = it->second;
    state.given.insert(std::string(spec.dest));
    const std::string where = "argument " + given.flag;
    if (given.occurrences > 1 && (spec.kind == FlagKind::kValue || spec.kind == FlagKind::kList)) {
      state.messages.push_back(repeated_flag_note(given.flag, static_cast<std::size_t>(given.occurrences), given.values));
    }
    if (spec.kind == FlagKind::kStoreTrue || spec.kind == FlagKind::kStoreFalse) {
      if constexpr (std::is_same_v<T, bool>) field = spec.kind == FlagKind::kStoreTrue;
      if (given.explicit_flag_value) fail(spec, where + ": ignored explicit argument; it takes no value");
    } else if (given.values.empty() || given.values == std::vector<std::string>{""}) {
      // CLI11 reports a flag given no value as one empty value.
      fail(spec, where + (spec.kind == FlagKind::kList ? ": expected at least one argument" : ": expected one argument"));
    } else if (spec.kind == FlagKind::kList) {
      if constexpr (std::is_same_v<T, std::vector<std::string>> ||
                    std::is_same_v<T, std::optional<std::vector<std::string>>>) {
        field = given.values;
      }
    } else if (given.values.size() != 1) {
      fail(spec, where + ": expected one argument, got " + std::to_string(given.values.size()));
    } else {
      convert(spec, where, given.values[0], field);
    }
  }

  void fail(const FieldSpec& spec, std::string message) {
    state.invalid.insert(std::string(spec.dest));
    state.problems.push_back(std::move(message));
  }

  template <typename T>
  void convert(const FieldSpec& spec, const std::string& where, const std::string& text, std::optional<T>& field) {
    T value{};
    if (convert(spec, where, text, value)) field = value;
  }
  bool convert(const FieldSpec& spec, const std::string& where, const std::string& text, std::string& field) {
    const Choices& choices = spec.choices;
    if (!choices.megatron.empty() && !choose(spec, where, text, choices.implemented.empty() ? choices.megatron : choices.implemented)) {
      return false;
    }
    field = text;
    return true;
  }
  // Every float flag must be finite: nan and inf would pass the range checks (nan compares false)
  // and only fail deep inside LibTorch or the schedule. The field keeps its default.
  bool convert(const FieldSpec& spec, const std::string& where, const std::string& text, double& field) {
    const auto value = parse_python_float(text);
    if (!value) {
      fail(spec, where + ": invalid float value: '" + text + "'");
    } else if (!std::isfinite(*value)) {
      fail(spec, where + ": " + trim(text) + " is not a finite number");
    } else {
      field = *value;
      return true;
    }
    return false;
  }
  template <typename T>
    requires std::is_integral_v<T> && (!std::is_same_v<T, bool>)
  bool convert(const FieldSpec& spec, const std::string& where, const std::string& text, T& field) {
    const auto value = parse_python_int(text);
    if (!value) {
      fail(spec, where + ": invalid int value: '" + text + "'");
    } else if (*value < std::numeric_limits<T>::min() || *value > std::numeric_limits<T>::max()) {
      fail(spec, where + ": " + text + " is out of range");
    } else {
      field = static_cast<T>(*value);
      return true;
    }
    return false;
  }
  template <typename E>
    requires std::is_enum_v<E>
  bool convert(const FieldSpec& spec, const std::string& where, const std::string& text, E& field) {
    std::vector<std::string_view> implemented;
    for (const auto& entry : enum_names(E{})) implemented.push_back(entry.name);
    if (!choose(spec, where, text, implemented)) return false;
    field = *parse_enum<E>(text);
    return true;
  }
  // Whether `text` is one of the choices this build implements; otherwise reports it, as not
  // supported yet when it is one of Megatron's choices, else as argparse's invalid choice.
  bool choose(const FieldSpec& spec, const std::string& where, const std::string& text,
              std::span<const std::string_view> implemented) {
    const auto megatron = spec.choices.megatron.empty() ? implemented : spec.choices.megatron;
    if (std::find(implemented.begin(), implemented.end(), text) != implemented.end()) return true;
    if (std::find(megatron.begin(), megatron.end(), text) != megatron.end()) {
      fail(spec, primary_flag(spec.flags) + " " + text + " is not supported by this build yet (supported: " +
                     quoted(implemented) + ")");
    } else {
      fail(spec, where + ": invalid choice: '" + text + "' (choose from " + quoted(megatron) + ")");
    }
    return false;
  }
  bool convert(const FieldSpec&, const std::string&, const std::string&, bool&) { return false; }
  bool convert(const FieldSpec&, const std::string&, const std::string&, std::vector<std::string>&) { return false; }
};

// The Megatron flags outside the flag table: a flag the table has by any alias is parsed as a field.
const std::vector<const detail::MegatronFlag*>& catalogued_flags() {
  static const auto flags = [] {
    std::set<std::string, std::less<>> table;
    const Arguments defaults;
    detail::for_each_field(defaults, [&](const FieldSpec& spec, const auto&) {
      for (const auto& name : split(spec.flags, ',')) table.insert(name);
    });
    std::vector<const detail::MegatronFlag*> out;
    for (const auto& flag : detail::megatron_flags()) {
      const auto names = split(flag.flags, ',');
      if (std::none_of(names.begin(), names.end(), [&](const std::string& n) { return table.contains(n); })) out.push_back(&flag);
    }
    return out;
  }();
  return flags;
}

// Registers every known flag with CLI11, each storing its last occurrence into `raw`.
void register_flags(CLI::App& app, std::map<std::string, RawValue, std::less<>>& raw, const Arguments& defaults,
                    std::map<std::string, std::pair<CLI::Option*, std::string>>& flag_options) {
  // Help lists the implemented flags with their defaults; catalogued ones are accepted but hidden.
  auto add = [&](std::string dest, std::string_view flags, FlagKind kind, std::string help, bool listed) {
    const std::string names(flags);
    CLI::Option* option = nullptr;
    if (kind == FlagKind::kStoreTrue || kind == FlagKind::kStoreFalse) {
      option = app.add_flag(names)->description(help);
      flag_options[dest] = {option, primary_flag(flags)};
    } else {
      const bool list = kind == FlagKind::kList;
      option = app.add_option(
                      names,
                      [&raw, dest, flag = primary_flag(flags)](const CLI::results_t& values) {
                        RawValue& entry = raw[dest];
                        entry = RawValue{flag, values, false, entry.flag.empty() ? 1 : entry.occurrences + 1};
                        return true;
                      },
                      help)
                   ->allow_extra_args(list)
                   ->expected(0, list ? CLI::detail::expected_max_vector_size : 1)
                   ->trigger_on_parse();
    }
    if (!listed) option->group("");
  };
  std::map<std::string_view, std::string> default_text;
  for (auto& [name, text] : detail::dump_values(defaults)) default_text[name] = std::move(text);
  detail::for_each_field(defaults, [&](const FieldSpec& spec, const auto&) {
    if (spec.kind == FlagKind::kDerived) return;
    std::string help(spec.help);
    const bool described = help.find("required") != std::string::npos || help.find("default") != std::string::npos;
    if (spec.kind != FlagKind::kStoreTrue && spec.kind != FlagKind::kStoreFalse && !described) {
      help += " [default: " + default_text[spec.dest] + "]";
    }
    add(std::string(spec.dest), spec.flags, spec.kind, help, true);
  });
  for (const auto* flag : catalogued_flags()) add("!" + std::string(flag->flags), flag->flags, detail::flag_kind(*flag), "", false);
  for (const auto& flag : detail::older_flags()) add("!" + std::string(flag.flags), flag.flags, flag.kind, "", false);
  for (const auto& flag : detail::legacy_flags()) {
    add("^" + std::string(flag.flag), flag.flag, flag.takes.empty() ? FlagKind::kStoreTrue : FlagKind::kValue,
        std::string(flag.note), false);
  }
  app.add_flag("-h,--help")->description("Print this help and exit.");
}

// Adds the store_true/store_false flags that were given to `raw`. Entries are named by their
// primary flag, whichever alias was given.
void collect_flags(std::map<std::string, RawValue, std::less<>>& raw,
                   const std::map<std::string, std::pair<CLI::Option*, std::string>>& flag_options) {
  for (const auto& [dest, option] : flag_options) {
    if (option.first->count() == 0) continue;
    RawValue value{option.second, {}, false};
    for (const auto& result : option.first->results()) {
      if (result == "true") continue;
      value.explicit_flag_value = true;
      value.values = {result};
    }
    raw[dest] = value;
  }
}

// Megatron's flags outside the table and older Megatron names that were given: each accepted with
// its note or refused with its reason.
void check_catalogued_flags(const std::map<std::string, RawValue, std::less<>>& raw, ParseState& state) {
  const auto explicit_value = [&](const RawValue& given) {
    if (given.explicit_flag_value) state.problems.push_back("argument " + given.flag + ": ignored explicit argument; it takes no value");
    return given.explicit_flag_value;
  };
  for (const auto* flag : catalogued_flags()) {
    const auto it = raw.find("!" + std::string(flag->flags));
    if (it == raw.end() || explicit_value(it->second)) continue;
    detail::check_given_flag(*flag, it->second.flag, it->second.values, state.messages, state.problems);
  }
  for (const auto& flag : detail::older_flags()) {
    const auto it = raw.find("!" + std::string(flag.flags));
    if (it == raw.end() || explicit_value(it->second)) continue;
    if (flag.treatment == detail::Treatment::kRefused) {
      state.problems.push_back(it->second.flag + " is not supported by this build yet: " + std::string(flag.why));
    } else {
      state.messages.push_back("WARNING: " + it->second.flag + " is ignored: " + std::string(flag.why));
    }
  }
}

std::vector<std::string> known_flag_names(const CLI::App& app) {
  std::vector<std::string> known;
  for (const CLI::Option* opt : app.get_options()) {
    for (const auto& name : opt->get_lnames()) known.push_back("--" + name);
  }
  return known;
}

}  // namespace

Arguments parse_arguments(const std::vector<std::string>& args, const ParseOptions& options) {
  Arguments result;
  ParseState state;
  std::map<std::string, RawValue, std::less<>> raw;
  std::map<std::string, std::pair<CLI::Option*, std::string>> flag_options;
  CLI::App app{"megatron_train: GPT pretraining with Megatron-LM's flags", "megatron_train"};
  app.set_help_flag();
  app.allow_extras();
  register_flags(app, raw, result, flag_options);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    state.problems.push_back(e.what());
  }
  collect_flags(raw, flag_options);

  std::vector<std::string> extras;
  for (const auto& extra : app.remaining()) {
    if (extra != "-h" && extra != "--help") extras.push_back(extra);
  }
  auto unknown = unknown_flag_problems(extras, known_flag_names(app));
  state.problems.insert(state.problems.begin(), unknown.begin(), unknown.end());
  check_catalogued_flags(raw, state);
  // Flags of the table that change nothing here: one warning each, unless a refused value says why.
  detail::for_each_field(result, [&](const FieldSpec& spec, const auto&) {
    const auto it = raw.find(spec.dest);
    if (spec.no_effect.empty() || it == raw.end()) return;
    const std::string& flag = it->second.flag;
    if (std::any_of(state.problems.begin(), state.problems.end(), [&](const std::string& p) { return p.starts_with(flag); })) {
      return;
    }
    state.messages.push_back("WARNING: " + flag + " is ignored: " + std::string(spec.no_effect));
  });
  std::map<std::string, std::string, std::less<>> legacy_given;
  for (const auto& flag : detail::legacy_flags()) {
    const auto it = raw.find("^" + std::string(flag.flag));
    if (it != raw.end()) legacy_given[std::string(flag.flag)] = it->second.values.empty() ? "" : it->second.values.back();
  }
  check_legacy_flags(detail::legacy_flags(), legacy_given, state.messages, state.problems);
  detail::for_each_field(result, ApplyValues{raw, state});
  detail::resolve_arguments(result, state, options);
  if (options.messages != nullptr) *options.messages = state.messages;
  throw_if_problems("invalid command line", state.problems);
  return result;
}

Arguments parse_arguments(int argc, const char* const* argv, const ParseOptions& options) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return parse_arguments(args, options);
}

bool help_requested(const std::vector<std::string>& args) {
  return std::any_of(args.begin(), args.end(), [](const std::string& a) { return a == "-h" || a == "--help"; });
}

std::string help_text() {
  std::map<std::string, RawValue, std::less<>> raw;
  std::map<std::string, std::pair<CLI::Option*, std::string>> flag_options;
  CLI::App app{"megatron_train: GPT pretraining with Megatron-LM's flags", "megatron_train"};
  app.set_help_flag();
  register_flags(app, raw, Arguments{}, flag_options);
  app.footer("Every other flag of Megatron-LM's pretrain_gpt.py is accepted with a note where it changes nothing "
             "here (kernel, overlap, memory and telemetry tunings; options only Megatron's other programs read), "
             "or refused with the reason.");
  return app.help();
}

}  // namespace megatron::train
