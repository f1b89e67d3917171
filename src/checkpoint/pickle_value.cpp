// PickleValue's accessors and its repr (see pickle.h).
#include <cmath>

#include "megatron/checkpoint/pickle.h"
#include "megatron/core/check.h"
#include "megatron/core/strings.h"

namespace megatron::checkpoint {
namespace {

using Kind = PickleValue::Kind;

std::string bytes_repr(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "b'";
  for (const char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    if (u == '\\' || u == '\'') {
      out += '\\';
      out += c;
    } else if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out + "'";
}

// A big int's little-endian two's complement bytes as a decimal number.
std::string big_int_repr(const std::string& bytes) {
  std::vector<unsigned char> digits(bytes.begin(), bytes.end());  // little-endian base 256
  const bool negative = !digits.empty() && (digits.back() & 0x80);
  if (negative) {  // magnitude = two's complement
    for (auto& d : digits) d = static_cast<unsigned char>(~d);
    for (auto& d : digits) {
      if (++d != 0) break;
    }
  }
  std::string decimal;
  while (std::any_of(digits.begin(), digits.end(), [](unsigned char d) { return d != 0; })) {
    unsigned remainder = 0;
    for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
      const unsigned value = (remainder << 8) | *it;
      *it = static_cast<unsigned char>(value / 10);
      remainder = value % 10;
    }
    decimal.insert(decimal.begin(), static_cast<char>('0' + remainder));
  }
  if (decimal.empty()) decimal.push_back('0');
  if (negative) decimal.insert(decimal.begin(), '-');
  return decimal;
}

std::string join_repr(const std::vector<PickleRef>& items, int depth) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i]->repr(depth);
  return out;
}

std::string entries_repr(const std::vector<std::pair<PickleRef, PickleRef>>& entries, int depth) {
  std::string out;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    out += (i ? ", " : "") + entries[i].first->repr(depth) + ": " + entries[i].second->repr(depth);
  }
  return out;
}

}  // namespace

std::string PickleValue::kind_name() const {
  switch (kind) {
    case Kind::kNone: return "None";
    case Kind::kBool: return "bool";
    case Kind::kInt: case Kind::kBigInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kBytes: return "bytes";
    case Kind::kList: return "list";
    case Kind::kTuple: return "tuple";
    case Kind::kDict: return "dict";
    case Kind::kSet: return "set";
    case Kind::kFrozenSet: return "frozenset";
    case Kind::kGlobal: return "global " + text;
    case Kind::kObject: return class_name() + " object";
    case Kind::kPersistentId: return "persistent id";
  }
  return "?";
}

std::string PickleValue::class_name() const {
  if (kind == Kind::kGlobal) return text;
  if (kind == Kind::kObject && callable && callable->kind == Kind::kGlobal) return callable->text;
  return "";
}

const PickleValue* PickleValue::find(std::string_view key) const {
  const auto* entries_of = this;
  if (kind == Kind::kObject && entries.empty() && state && state->kind == Kind::kDict) entries_of = state.get();
  for (const auto& [k, v] : entries_of->entries) {
    if (k->kind == Kind::kString && k->text == key) return v.get();
  }
  return nullptr;
}

std::string PickleValue::repr(int depth) const {
  if (depth <= 0) return "...";
  --depth;
  switch (kind) {
    case Kind::kNone: return "None";
    case Kind::kBool: return boolean ? "True" : "False";
    case Kind::kInt: return std::to_string(integer);
    case Kind::kBigInt: return big_int_repr(text);
    case Kind::kFloat: return python_float_repr(real);
    case Kind::kString: return python_repr(text);
    case Kind::kBytes: return bytes_repr(text);
    case Kind::kList: return str_cat("[", join_repr(items, depth), "]");
    case Kind::kTuple: return str_cat("(", join_repr(items, depth), items.size() == 1 ? ",)" : ")");
    case Kind::kDict: return str_cat("{", entries_repr(entries, depth), "}");
    case Kind::kSet: return str_cat("set([", join_repr(items, depth), "])");
    case Kind::kFrozenSet: return str_cat("frozenset([", join_repr(items, depth), "])");
    case Kind::kGlobal: return text;
    case Kind::kPersistentId: return str_cat("persistent_load(", join_repr(items, depth), ")");
    case Kind::kObject: {
      std::string out = str_cat(callable ? callable->repr(depth) : std::string("?"), "(",
                                args ? join_repr(args->items, depth) : std::string(), ")");
      if (!items.empty()) out += str_cat("[", join_repr(items, depth), "]");
      if (!entries.empty()) out += str_cat("{", entries_repr(entries, depth), "}");
      if (state) out += str_cat(".__setstate__(", state->repr(depth), ")");
      return out;
    }
  }
  return "?";
}

}  // namespace megatron::checkpoint
