// Python json.dumps formatting (see python_json.h): Lib/json/encoder.py with indent set and
// ensure_ascii on.
#include "megatron/data/python_json.h"

#include <cmath>
#include <cstdio>

#include "megatron/core/check.h"
#include "megatron/core/strings.h"

namespace megatron::data {
namespace {

void append_u_escape(std::string& out, unsigned code) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "\\u%04x", code);
  out += buf;
}

// Decodes one UTF-8 sequence at s[i]; returns the code point and advances i, or returns -1
// (and advances one byte) for an invalid sequence.
long decode_utf8(const std::string& s, std::size_t& i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned lead = byte(i);
  int length = 0;
  unsigned code = 0;
  if (lead < 0x80) {
    ++i;
    return lead;
  } else if ((lead & 0xe0) == 0xc0) {
    length = 2;
    code = lead & 0x1f;
  } else if ((lead & 0xf0) == 0xe0) {
    length = 3;
    code = lead & 0x0f;
  } else if ((lead & 0xf8) == 0xf0) {
    length = 4;
    code = lead & 0x07;
  } else {
    ++i;
    return -1;
  }
  if (i + static_cast<std::size_t>(length) > s.size()) {
    ++i;
    return -1;
  }
  for (int k = 1; k < length; ++k) {
    const unsigned next = byte(i + static_cast<std::size_t>(k));
    if ((next & 0xc0) != 0x80) {
      ++i;
      return -1;
    }
    code = (code << 6) | (next & 0x3f);
  }
  static constexpr unsigned kMinimum[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kMinimum[length] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) {
    ++i;
    return -1;
  }
  i += static_cast<std::size_t>(length);
  return static_cast<long>(code);
}

void newline(std::string& out, int indent, int depth) {
  out += '\n';
  out.append(static_cast<std::size_t>(indent * depth), ' ');
}

}  // namespace

std::string python_json_string(const std::string& utf8) {
  std::string out = "\"";
  std::size_t i = 0;
  while (i < utf8.size()) {
    const unsigned char raw = static_cast<unsigned char>(utf8[i]);
    const long code = decode_utf8(utf8, i);
    if (code < 0) {
      append_u_escape(out, 0xdc00u + raw);  // surrogateescape
    } else if (code == '"') {
      out += "\\\"";
    } else if (code == '\\') {
      out += "\\\\";
    } else if (code == '\n') {
      out += "\\n";
    } else if (code == '\r') {
      out += "\\r";
    } else if (code == '\t') {
      out += "\\t";
    } else if (code == '\b') {
      out += "\\b";
    } else if (code == '\f') {
      out += "\\f";
    } else if (code >= 0x20 && code <= 0x7e) {
      out += static_cast<char>(code);
    } else if (code < 0x10000) {
      append_u_escape(out, static_cast<unsigned>(code));
    } else {
      const unsigned v = static_cast<unsigned>(code) - 0x10000;
      append_u_escape(out, 0xd800 | (v >> 10));
      append_u_escape(out, 0xdc00 | (v & 0x3ff));
    }
  }
  return out + "\"";
}

PyJson& PyJson::set(std::string key, PyJson value) {
  MEGATRON_ASSERT(is_dict(), "PyJson::set on a value that is not a dict");
  std::get<Dict>(value_).emplace_back(std::move(key), std::move(value));
  return *this;
}

PyJson& PyJson::push_back(PyJson value) {
  MEGATRON_ASSERT(std::holds_alternative<List>(value_), "PyJson::push_back on a non-list");
  std::get<List>(value_).push_back(std::move(value));
  return *this;
}

std::string PyJson::dumps(int indent) const {
  std::string out;
  dump(out, indent, 0);
  return out;
}

void PyJson::dump(std::string& out, int indent, int depth) const {
  if (std::holds_alternative<std::monostate>(value_)) {
    out += "null";
  } else if (const bool* b = std::get_if<bool>(&value_)) {
    out += *b ? "true" : "false";
  } else if (const std::int64_t* n = std::get_if<std::int64_t>(&value_)) {
    out += std::to_string(*n);
  } else if (const double* d = std::get_if<double>(&value_)) {
    if (std::isnan(*d)) {
      out += "NaN";
    } else if (std::isinf(*d)) {
      out += *d > 0 ? "Infinity" : "-Infinity";
    } else {
      out += python_float_repr(*d);
    }
  } else if (const std::string* s = std::get_if<std::string>(&value_)) {
    out += python_json_string(*s);
  } else if (const List* list = std::get_if<List>(&value_)) {
    if (list->empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (std::size_t i = 0; i < list->size(); ++i) {
      if (i > 0) out += ',';
      newline(out, indent, depth + 1);
      (*list)[i].dump(out, indent, depth + 1);
    }
    newline(out, indent, depth);
    out += ']';
  } else {
    const Dict& dict = std::get<Dict>(value_);
    if (dict.empty()) {
      out += "{}";
      return;
    }
    out += '{';
    for (std::size_t i = 0; i < dict.size(); ++i) {
      if (i > 0) out += ',';
      newline(out, indent, depth + 1);
      out += python_json_string(dict[i].first);
      out += ": ";
      dict[i].second.dump(out, indent, depth + 1);
    }
    newline(out, indent, depth);
    out += '}';
  }
}

}  // namespace megatron::data
