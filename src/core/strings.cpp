// Python float repr and number parsing, edit distance and size formatting (see strings.h).
#include "megatron/core/strings.h"

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace megatron {

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // Shortest round-trip digits in scientific form: [-]d[.ddd]e[+-]XX.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const auto e_pos = sci.find('e');
  std::string digits = sci.substr(0, e_pos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exponent = std::stoi(sci.substr(e_pos + 1));
  if (exponent >= -4 && exponent < 16) {
    std::string out;
    if (exponent < 0) {
      out = "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exponent + 1) {
      out = digits + std::string(static_cast<std::size_t>(exponent + 1) - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<std::size_t>(exponent + 1)) + "." +
            digits.substr(static_cast<std::size_t>(exponent + 1));
    }
    return sign + out;
  }
  std::string mantissa = digits.substr(0, 1);
  if (digits.size() > 1) mantissa += "." + digits.substr(1);
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return sign + mantissa + exp_buf;
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string_view strip_python_whitespace(std::string_view text) {
  const auto begin = text.find_first_not_of(" \t\n\r\f\v");
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(" \t\n\r\f\v") - begin + 1);
}

// The sign taken off `text`; true when it was '-'.
bool take_sign(std::string_view& text) {
  const bool negative = !text.empty() && text[0] == '-';
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) text.remove_prefix(1);
  return negative;
}

// `text` without its underscores, or nullopt when one is not between two digits (PEP 515).
std::optional<std::string> without_digit_underscores(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '_') {
      out += text[i];
    } else if (i == 0 || i + 1 == text.size() || !is_digit(text[i - 1]) || !is_digit(text[i + 1])) {
      return std::nullopt;
    }
  }
  return out;
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

std::optional<double> parse_python_float(std::string_view text) {
  std::string_view body = strip_python_whitespace(text);
  const bool negative = take_sign(body);
  const double sign = negative ? -1.0 : 1.0;
  if (equals_ignoring_case(body, "inf") || equals_ignoring_case(body, "infinity")) {
    return sign * std::numeric_limits<double>::infinity();
  }
  if (equals_ignoring_case(body, "nan")) return std::numeric_limits<double>::quiet_NaN();
  // What is left must be digits, one '.', one exponent: no sign of its own, no hex, no "nan(...)".
  if (body.empty() || !(is_digit(body[0]) || body[0] == '.')) return std::nullopt;
  for (const char c : body) {
    if (!is_digit(c) && c != '.' && c != '_' && c != 'e' && c != 'E' && c != '+' && c != '-') return std::nullopt;
  }
  const std::optional<std::string> plain = without_digit_underscores(body);
  if (!plain) return std::nullopt;
  double value = 0.0;
  const char* end = plain->data() + plain->size();
  const auto [ptr, ec] = std::from_chars(plain->data(), end, value, std::chars_format::general);
  if (ptr != end) return std::nullopt;
  if (ec == std::errc::result_out_of_range) {
    value = std::strtod(plain->c_str(), nullptr);  // +-HUGE_VAL on overflow, 0 or a denormal on underflow
  } else if (ec != std::errc()) {
    return std::nullopt;
  }
  return sign * value;
}

std::optional<std::int64_t> parse_python_int(std::string_view text) {
  std::string_view body = strip_python_whitespace(text);
  const bool negative = take_sign(body);
  if (body.empty() || !is_digit(body[0])) return std::nullopt;
  const std::optional<std::string> digits = without_digit_underscores(body);
  if (!digits || !std::all_of(digits->begin(), digits->end(), is_digit)) return std::nullopt;
  std::uint64_t magnitude = 0;
  const char* end = digits->data() + digits->size();
  const auto [ptr, ec] = std::from_chars(digits->data(), end, magnitude);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (magnitude > kMax + (negative ? 1 : 0)) return std::nullopt;
  if (negative) return magnitude == kMax + 1 ? std::numeric_limits<std::int64_t>::min() : -static_cast<std::int64_t>(magnitude);
  return static_cast<std::int64_t>(magnitude);
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::string closest_match(std::string_view name, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = static_cast<std::size_t>(-1);
  for (const auto& candidate : candidates) {
    const std::size_t distance = edit_distance(name, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  // Accept up to a third of the name's length in edits (at least 2): close enough to be a typo.
  const std::size_t limit = std::max<std::size_t>(2, name.size() / 3);
  return best_distance <= limit ? best : std::string();
}

std::string shell_word(std::string_view text) {
  const auto safe = [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           std::string_view("@%+=:,./-_").find(ch) != std::string_view::npos;
  };
  if (!text.empty() && std::all_of(text.begin(), text.end(), safe)) return std::string(text);
  std::string out = "'";
  for (const char ch : text) out += ch == '\'' ? std::string("'\"'\"'") : std::string(1, ch);
  return out + "'";
}

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += separator;
    out += parts[i];
  }
  return out;
}

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  while (!text.empty()) {
    const auto at = text.find(separator);
    parts.emplace_back(text.substr(0, at));
    if (at == std::string_view::npos) break;
    text.remove_prefix(at + 1);
  }
  return parts;
}

std::string human_bytes(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char buf[32];
  if (unit == 0) {
    std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f %s", value, kUnits[unit]);
  }
  return buf;
}

std::string python_repr(std::string_view text) {
  const char quote = text.find('\'') != std::string::npos && text.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == quote || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + quote;
}

std::string python_list_str(const std::vector<std::string>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + python_repr(values[i]);
  return out + "]";
}

}  // namespace megatron
