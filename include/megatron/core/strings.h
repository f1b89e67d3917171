// Small string utilities shared by the tools: Python-compatible text of numbers (written and read)
// and strings, byte-size text and "did you mean" suggestions for misspelt flags.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace megatron {

// The text Python's repr(float) gives: the shortest digits that round-trip, fixed notation for
// decimal exponents in [-4, 16), otherwise d.ddde+XX; integral values keep a trailing ".0".
std::string python_float_repr(double value);

// Python's repr() of a str: single quotes unless the text holds ' and no ", escapes for \\, the
// quote, \n \r \t and other control bytes (\xNN); other bytes as they are.
std::string python_repr(std::string_view text);

// Python's str() of a list of str: ['a', 'b'].
std::string python_list_str(const std::vector<std::string>& values);

// Python's float(text): surrounding whitespace, a sign, decimal or exponent notation with single
// underscores between digits, inf / infinity / nan in any case; overflow gives +-inf and
// underflow 0, as in Python. No hexadecimal. nullopt where Python raises ValueError.
std::optional<double> parse_python_float(std::string_view text);

// Python's int(text) for decimal text: surrounding whitespace, a sign, digits with single
// underscores between them. nullopt where Python raises ValueError or the value does not fit.
std::optional<std::int64_t> parse_python_int(std::string_view text);

// Edit distance (insert, delete, substitute, adjacent swap), for flag suggestions.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `name`, or "" when none is reasonably close.
std::string closest_match(std::string_view name, const std::vector<std::string>& candidates);

// One word of a POSIX shell command line, as Python's shlex.quote writes it: as it is when it is
// non-empty and made of letters, digits and @%+=:,./-_ only, otherwise in single quotes (each '
// written as '"'"').
std::string shell_word(std::string_view text);

// The parts with `separator` between them: join({"a", "b"}, ", ") is "a, b".
std::string join(const std::vector<std::string>& parts, std::string_view separator);

// The pieces of `text` between the separators: split("a,b", ',') is {"a", "b"}; "" gives {}.
std::vector<std::string> split(std::string_view text, char separator);

// "1.50 GiB", "12.3 MiB", "512 B".
std::string human_bytes(std::uint64_t bytes);

}  // namespace megatron
