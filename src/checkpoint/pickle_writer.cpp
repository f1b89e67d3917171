// Writing Python pickles (see pickle.h): the protocol-3 opcodes for the values Megatron's checkpoint
// files hold (DCP's Metadata, an args Namespace, torch.save's tensor references). Written by hand
// for the same reason as the reader: no C++ library writes pickles of arbitrary classes.
#include <bit>
#include <cstring>
#include <unordered_set>

#include "megatron/checkpoint/pickle.h"
#include "megatron/core/check.h"

namespace megatron::checkpoint {
namespace {

using Kind = PickleValue::Kind;

class Writer {
 public:
  std::string out;

  void value(const PickleValue& v, int depth = 0) {
    MEGATRON_CHECK(depth < 200 && !open_.contains(&v), "write_pickle: the value contains itself or nests deeper "
                   "than 200 levels");
    open_.insert(&v);
    switch (v.kind) {
      case Kind::kNone: op('N'); break;
      case Kind::kBool: op(v.boolean ? '\x88' : '\x89'); break;
      case Kind::kInt: integer(v.integer); break;
      case Kind::kBigInt: long1(v.text); break;
      case Kind::kFloat: {
        op('G');  // BINFLOAT: big-endian IEEE double
        const auto bits = __builtin_bswap64(std::bit_cast<std::uint64_t>(v.real));
        raw(&bits, 8);
        break;
      }
      case Kind::kString: sized('X', v.text); break;  // BINUNICODE
      case Kind::kBytes: latin1_bytes(v.text); break;
      case Kind::kTuple: tuple(v.items, depth); break;
      case Kind::kList:
        op(']');  // EMPTY_LIST
        appends(v.items, depth);
        break;
      case Kind::kDict:
        op('}');  // EMPTY_DICT
        setitems(v.entries, depth);
        break;
      case Kind::kSet:
      case Kind::kFrozenSet:  // as protocol 2 writes them: builtins.set(list), builtins.frozenset(list)
        global(v.kind == Kind::kSet ? "builtins.set" : "builtins.frozenset");
        op(']');
        appends(v.items, depth);
        op('\x85');  // TUPLE1
        op('R');
        break;
      case Kind::kGlobal: global(v.text); break;
      case Kind::kObject: object(v, depth); break;
      case Kind::kPersistentId:
        MEGATRON_CHECK(v.items.size() == 1, "write_pickle: a persistent id holds one value");
        value(*v.items[0], depth + 1);
        op('Q');  // BINPERSID
        break;
    }
    open_.erase(&v);
  }

 private:
  std::unordered_set<const PickleValue*> open_;  // the values being written: a cycle is refused

  void op(char c) { out.push_back(c); }
  void raw(const void* data, std::size_t n) { out.append(static_cast<const char*>(data), n); }
  void sized(char code, const std::string& text) {
    MEGATRON_CHECK(text.size() <= 0xffffffffu, "write_pickle: a string or bytes of ", text.size(), " bytes");
    op(code);
    const auto n = static_cast<std::uint32_t>(text.size());
    raw(&n, 4);  // little-endian on every machine this builds for
    out += text;
  }
  // Protocol 2 has no bytes opcode: pickle writes bytes as _codecs.encode(<their code points>, 'latin1').
  void latin1_bytes(const std::string& bytes) {
    global("_codecs.encode");
    std::string text;
    for (const char c : bytes) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x80) {
        text.push_back(c);
      } else {  // U+0080..U+00FF in UTF-8
        text.push_back(static_cast<char>(0xC0 | (u >> 6)));
        text.push_back(static_cast<char>(0x80 | (u & 0x3F)));
      }
    }
    sized('X', text);
    sized('X', "latin1");
    op('\x86');  // TUPLE2
    op('R');     // REDUCE
  }
  void integer(std::int64_t i) {
    if (i >= 0 && i < 256) {
      op('K');
      out.push_back(static_cast<char>(i));
    } else if (i >= 0 && i < 65536) {
      op('M');
      const auto u = static_cast<std::uint16_t>(i);
      raw(&u, 2);
    } else if (i >= INT32_MIN && i <= INT32_MAX) {
      op('J');
      const auto s = static_cast<std::int32_t>(i);
      raw(&s, 4);
    } else {
      std::string bytes(8, '\0');
      std::memcpy(bytes.data(), &i, 8);
      long1(bytes);
    }
  }
  void long1(const std::string& twos_complement) {
    MEGATRON_CHECK(twos_complement.size() < 256, "write_pickle: an integer of ", twos_complement.size(), " bytes");
    op('\x8a');  // LONG1
    out.push_back(static_cast<char>(twos_complement.size()));
    out += twos_complement;
  }
  void global(const std::string& dotted) {
    const std::size_t dot = dotted.rfind('.');
    MEGATRON_CHECK(dot != std::string::npos && dot > 0 && dot + 1 < dotted.size() &&
                       dotted.find('\n') == std::string::npos,
                   "write_pickle: '", dotted, "' is not a module.name");
    op('c');  // GLOBAL
    out += dotted.substr(0, dot) + "\n" + dotted.substr(dot + 1) + "\n";
  }
  void tuple(const std::vector<PickleRef>& items, int depth) {
    if (items.empty()) return op(')');
    if (items.size() > 3) op('(');  // MARK
    for (const auto& item : items) value(*item, depth + 1);
    static constexpr char kSmall[] = {'\x85', '\x86', '\x87'};  // TUPLE1..3
    op(items.size() > 3 ? 't' : kSmall[items.size() - 1]);
  }
  void appends(const std::vector<PickleRef>& items, int depth) {
    if (items.empty()) return;
    op('(');
    for (const auto& item : items) value(*item, depth + 1);
    op('e');  // APPENDS
  }
  void setitems(const std::vector<std::pair<PickleRef, PickleRef>>& entries, int depth) {
    if (entries.empty()) return;
    op('(');
    for (const auto& [key, item] : entries) {
      value(*key, depth + 1);
      value(*item, depth + 1);
    }
    op('u');  // SETITEMS
  }
  void object(const PickleValue& v, int depth) {
    MEGATRON_CHECK(v.callable && v.callable->kind == Kind::kGlobal, "write_pickle: an object without a class");
    global(v.callable->text);
    if (v.args) {
      MEGATRON_CHECK(v.args->kind == Kind::kTuple, "write_pickle: ", v.callable->text, "'s arguments are not a tuple");
      tuple(v.args->items, depth);
    } else {
      op(')');
    }
    op(v.constructed ? '\x81' : 'R');  // NEWOBJ or REDUCE
    if (v.state) {
      value(*v.state, depth + 1);
      op('b');  // BUILD
    }
    appends(v.items, depth);
    setitems(v.entries, depth);
  }
};

}  // namespace

std::string write_pickle(const PickleValue& value) {
  Writer w;
  w.out = "\x80\x02";  // PROTO 2, torch.save's
  w.value(value);
  w.out.push_back('.');  // STOP
  return std::move(w.out);
}

namespace py {

PickleRef empty(Kind kind) {
  auto v = std::make_shared<PickleValue>();
  v->kind = kind;
  return v;
}
PickleRef none() { return empty(Kind::kNone); }
PickleRef boolean(bool b) {
  auto v = empty(Kind::kBool);
  v->boolean = b;
  return v;
}
PickleRef integer(std::int64_t i) {
  auto v = empty(Kind::kInt);
  v->integer = i;
  return v;
}
PickleRef big_integer(std::string twos_complement) {
  auto v = empty(Kind::kBigInt);
  v->text = std::move(twos_complement);
  return v;
}
PickleRef real(double d) {
  auto v = empty(Kind::kFloat);
  v->real = d;
  return v;
}
PickleRef str(std::string s) {
  auto v = empty(Kind::kString);
  v->text = std::move(s);
  return v;
}
PickleRef bytes(std::string b) {
  auto v = empty(Kind::kBytes);
  v->text = std::move(b);
  return v;
}
PickleRef tuple(std::vector<PickleRef> items) {
  auto v = empty(Kind::kTuple);
  v->items = std::move(items);
  return v;
}
PickleRef list(std::vector<PickleRef> items) {
  auto v = empty(Kind::kList);
  v->items = std::move(items);
  return v;
}
PickleRef dict(std::vector<std::pair<PickleRef, PickleRef>> entries) {
  auto v = empty(Kind::kDict);
  v->entries = std::move(entries);
  return v;
}
PickleRef global(std::string dotted) {
  auto v = empty(Kind::kGlobal);
  v->text = std::move(dotted);
  return v;
}
PickleRef call(const std::string& callable, std::vector<PickleRef> args) {
  auto v = empty(Kind::kObject);
  v->callable = global(callable);
  v->args = tuple(std::move(args));
  return v;
}
PickleRef instance(const std::string& cls, PickleRef state, std::vector<PickleRef> args) {
  auto v = call(cls, std::move(args));
  v->constructed = true;
  v->state = std::move(state);
  return v;
}
PickleRef persistent_id(PickleRef id) {
  auto v = empty(Kind::kPersistentId);
  v->items = {std::move(id)};
  return v;
}

}  // namespace py
}  // namespace megatron::checkpoint
