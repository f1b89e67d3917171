// Looking up and checking the Megatron flags outside the flag table (megatron_flags.h); the rules
// themselves are in flag_catalogue.cpp.
#include "megatron_flags.h"

#include <algorithm>

#include "megatron/core/strings.h"

namespace megatron::train::detail {

namespace {

// A pattern has at most one '*' inside ("--encoder-*-parallel-size") and may end in one ("--fp8-*",
// "--*cuda-graph*": anywhere after "--").
bool matches(std::string_view pattern, std::string_view flag) {
  const auto star = pattern.find('*');
  if (star == std::string_view::npos) return pattern == flag;
  const auto head = pattern.substr(0, star);
  auto tail = pattern.substr(star + 1);
  if (!flag.starts_with(head)) return false;
  const auto rest = flag.substr(head.size());
  if (!tail.ends_with('*')) return rest.ends_with(tail);
  tail.remove_suffix(1);
  return rest.find(tail) != std::string_view::npos;
}

// argparse's complaint about one value of the flag, or "" when argparse would take it.
std::string value_problem(const MegatronFlag& flag, const std::string& spelled, const std::string& value) {
  const std::string where = "argument " + spelled + ": ";
  if (flag.type == "int" && !parse_python_int(value)) return where + "invalid int value: '" + value + "'";
  if (flag.type == "float" && !parse_python_float(value)) return where + "invalid float value: '" + value + "'";
  if (!flag.choices.empty() && !one_of(flag.choices, value)) {
    const std::vector<std::string> choices = split(flag.choices, '|');
    const std::vector<std::string_view> names(choices.begin(), choices.end());
    return where + "invalid choice: '" + value + "' (choose from " + quoted(names) + ")";
  }
  return "";
}

}  // namespace

FlagKind flag_kind(const MegatronFlag& flag) {
  if (flag.kind == "store_true" || flag.kind == "store_const") return FlagKind::kStoreTrue;
  if (flag.kind == "store_false") return FlagKind::kStoreFalse;
  if (flag.kind == "list") return FlagKind::kList;
  return FlagKind::kValue;
}

const FlagRule* rule_for(const MegatronFlag& flag) {
  for (const FlagRule& rule : flag_rules()) {
    std::string_view names = flag.flags;
    while (!names.empty()) {
      const auto comma = names.find(',');
      if (matches(rule.pattern, names.substr(0, comma))) return &rule;
      names = comma == std::string_view::npos ? "" : names.substr(comma + 1);
    }
  }
  const auto groups = group_rules();
  const auto group = std::find_if(groups.begin(), groups.end(), [&](const FlagRule& rule) { return rule.pattern == flag.group; });
  return group == groups.end() ? nullptr : &*group;
}

bool one_of(std::string_view values, std::string_view value) {
  while (true) {
    const auto bar = values.find('|');
    if (values.substr(0, bar) == value) return true;
    if (bar == std::string_view::npos) return false;
    values.remove_prefix(bar + 1);
  }
}

void check_given_flag(const MegatronFlag& flag, const std::string& spelled, const std::vector<std::string>& values,
                      std::vector<std::string>& messages, std::vector<std::string>& problems) {
  static constexpr FlagRule kUnruled{"", Treatment::kRefused, "not implemented yet"};
  const FlagRule* found = rule_for(flag);
  const FlagRule& rule = found != nullptr ? *found : kUnruled;
  const FlagKind kind = flag_kind(flag);
  const bool takes_values = kind == FlagKind::kValue || kind == FlagKind::kList;
  // CLI11 reports a flag given no value as one empty value.
  const bool no_value = values.empty() || values == std::vector<std::string>{""};
  if (takes_values && no_value && flag.kind != "optional") {
    problems.push_back("argument " + spelled + (kind == FlagKind::kList ? ": expected at least one argument" : ": expected one argument"));
    return;
  }
  if (rule.treatment == Treatment::kRefused) {
    const bool harmless = !rule.harmless.empty() && !values.empty() &&
                          std::all_of(values.begin(), values.end(), [&](const std::string& v) { return one_of(rule.harmless, v); });
    if (harmless) return;
    // A refusal that depends on the value names it ("--rerun-mode validate_results").
    const std::string value = !rule.harmless.empty() && values.size() == 1 ? " " + values[0] : "";
    problems.push_back(spelled + value + " is not supported by this build yet: " + std::string(rule.why));
    return;
  }
  for (const auto& value : values) {
    if (auto problem = value_problem(flag, spelled, value); !problem.empty()) {
      problems.push_back(std::move(problem));
      return;
    }
  }
  messages.push_back("WARNING: " + spelled + " is ignored: " + std::string(rule.why));
}

}  // namespace megatron::train::detail
