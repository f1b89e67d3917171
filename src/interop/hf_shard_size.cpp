// HuggingFace's max_shard_size units (see hf_shard_size.h).
#include "megatron/interop/hf_shard_size.h"

#include <array>
#include <cctype>
#include <charconv>
#include <limits>
#include <string>

#include "megatron/core/check.h"

namespace megatron::interop {
namespace {

bool ends_with_ignoring_case(std::string_view text, std::string_view suffix) {
  if (text.size() < suffix.size()) return false;
  for (std::size_t i = 0; i < suffix.size(); ++i) {
    const auto a = static_cast<unsigned char>(text[text.size() - suffix.size() + i]);
    if (std::toupper(a) != static_cast<unsigned char>(suffix[i])) return false;
  }
  return true;
}

}  // namespace

std::uint64_t parse_shard_size(std::string_view text) {
  struct Unit {
    std::string_view suffix;
    std::uint64_t bytes;
    bool decimal;
  };
  // Longest suffixes first: "GIB" before "IB"-less "GB"; "B" alone is a byte.
  constexpr std::array<Unit, 7> kUnits{{{"GIB", 1ull << 30, false}, {"MIB", 1ull << 20, false},
                                        {"KIB", 1ull << 10, false}, {"GB", 1000000000ull, true},
                                        {"MB", 1000000ull, true}, {"KB", 1000ull, true}, {"B", 1ull, false}}};
  std::string_view number = text;
  std::uint64_t scale = 1, divisor = 1;
  for (const Unit& unit : kUnits) {
    if (!ends_with_ignoring_case(text, unit.suffix)) continue;
    if (unit.suffix == "B" && text.back() != 'B') break;  // a lone "b" would be bits of nothing: refused
    number = text.substr(0, text.size() - unit.suffix.size());
    scale = unit.bytes;
    if (unit.decimal && text.back() == 'b') divisor = 8;  // bits, as HuggingFace reads "5Gb"
    break;
  }
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), value);
  const bool whole = !number.empty() && error == std::errc() && end == number.data() + number.size();
  MEGATRON_CHECK(whole && value > 0, "--max-shard-size ", text,
                 ": expected a positive whole number of bytes, or one followed by KB, MB, GB, KiB, MiB or GiB "
                 "(e.g. 5GB, HuggingFace's default)");
  MEGATRON_CHECK(value <= std::numeric_limits<std::uint64_t>::max() / scale, "--max-shard-size ", text,
                 ": more bytes than a file can hold");
  const std::uint64_t bytes = value * scale / divisor;
  MEGATRON_CHECK(bytes > 0, "--max-shard-size ", text, ": less than one byte");
  return bytes;
}

}  // namespace megatron::interop
