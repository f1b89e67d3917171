// The pickle reader (see pickle.h): Python's pickle virtual machine (Lib/pickle.py, protocols 0-5)
// over a stack of shared values, with every "call" left as a placeholder object.
#include "megatron/checkpoint/pickle.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <map>

#include "megatron/core/check.h"
#include "megatron/core/strings.h"

namespace megatron::checkpoint {
namespace {

using Kind = PickleValue::Kind;

// A little-endian two's complement integer of any length (LONG1, LONG4): an int when it fits.
PickleRef make_long(std::string_view bytes) {
  if (bytes.size() <= 8) {
    std::uint64_t u = 0;
    for (std::size_t i = 0; i < bytes.size(); ++i) u |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
    if (!bytes.empty() && bytes.size() < 8 && (static_cast<unsigned char>(bytes.back()) & 0x80)) {
      u |= ~std::uint64_t{0} << (8 * bytes.size());  // sign-extend
    }
    return py::integer(static_cast<std::int64_t>(u));
  }
  return py::big_integer(std::string(bytes));
}

class Machine {
 public:
  Machine(std::string_view bytes, const std::string& where) : in_(bytes), where_(where) {}

  PickleRef run() {
    while (true) {
      const std::size_t at = pos_;
      const auto op = static_cast<unsigned char>(take(1)[0]);
      if (op == '.') {  // STOP
        fail_unless(stack_.size() == 1 && marks_.empty(), at, "STOP with ", stack_.size(), " values on the stack");
        return stack_.back();
      }
      step(op, at);
    }
  }

 private:
  template <typename... Args>
  [[noreturn]] void fail(std::size_t at, Args&&... args) const {
    MEGATRON_FAIL(where_, ": not a readable pickle at byte ", at, ": ", std::forward<Args>(args)...);
  }
  template <typename... Args>
  void fail_unless(bool ok, std::size_t at, Args&&... args) const {
    if (!ok) fail(at, std::forward<Args>(args)...);
  }

  std::string_view take(std::size_t n) {
    fail_unless(n <= in_.size() - pos_, pos_, "needs ", n, " more bytes, ", in_.size() - pos_, " are left (truncated)");
    const std::string_view out = in_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  template <typename T>
  T little() {
    T v{};
    static_assert(std::endian::native == std::endian::little, "pickle integers are little-endian");
    std::memcpy(&v, take(sizeof(T)).data(), sizeof(T));
    return v;
  }
  std::size_t length(std::size_t bytes) {
    const std::uint64_t n = bytes == 1 ? little<std::uint8_t>() : bytes == 4 ? little<std::uint32_t>() : little<std::uint64_t>();
    fail_unless(n <= in_.size() - pos_, pos_, "a length of ", n, " bytes, past the ", in_.size() - pos_, " left");
    // No object is larger than PTRDIFF_MAX (also what tells the compiler so).
    fail_unless(n <= static_cast<std::uint64_t>(PTRDIFF_MAX), pos_, "a length of ", n, " bytes");
    return static_cast<std::size_t>(n);
  }
  std::string_view line() {
    const auto end = in_.find('\n', pos_);
    fail_unless(end != std::string_view::npos, pos_, "a text argument without its newline (truncated)");
    const std::string_view out = in_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }

  PickleRef pop(std::size_t at) {
    fail_unless(stack_.size() > (marks_.empty() ? 0 : marks_.back()), at, "the stack is empty");
    PickleRef v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  PickleRef& top(std::size_t at) {
    fail_unless(stack_.size() > (marks_.empty() ? 0 : marks_.back()), at, "the stack is empty");
    return stack_.back();
  }
  // The values since the last MARK, which is dropped.
  std::vector<PickleRef> pop_mark(std::size_t at) {
    fail_unless(!marks_.empty(), at, "no MARK");
    const std::size_t from = marks_.back();
    marks_.pop_back();
    std::vector<PickleRef> out(stack_.begin() + static_cast<std::ptrdiff_t>(from), stack_.end());
    stack_.resize(from);
    return out;
  }
  PickleRef tuple(std::vector<PickleRef> items) {
    auto t = py::empty(Kind::kTuple);
    t->items = std::move(items);
    return t;
  }
  void add_items(PickleValue& target, std::vector<PickleRef> items, std::size_t at) {
    fail_unless(target.kind == Kind::kList || target.kind == Kind::kObject || target.kind == Kind::kSet, at,
                "APPEND or ADDITEMS to a ", target.kind_name());
    for (auto& item : items) target.items.push_back(std::move(item));
  }
  void set_items(PickleValue& target, const std::vector<PickleRef>& pairs, std::size_t at) {
    fail_unless(target.kind == Kind::kDict || target.kind == Kind::kObject, at, "SETITEM on a ", target.kind_name());
    fail_unless(pairs.size() % 2 == 0, at, "SETITEMS with an odd number of values");
    for (std::size_t i = 0; i < pairs.size(); i += 2) {
      auto& entries = target.entries;
      // A key given again replaces its value, as in a dict (str and int keys; others are appended).
      const PickleValue& key = *pairs[i];
      auto same = std::find_if(entries.begin(), entries.end(), [&](const auto& e) {
        return e.first->kind == key.kind && ((key.kind == Kind::kString && e.first->text == key.text) ||
                                             (key.kind == Kind::kInt && e.first->integer == key.integer));
      });
      if (same != entries.end() && (key.kind == Kind::kString || key.kind == Kind::kInt)) {
        same->second = pairs[i + 1];
      } else {
        entries.emplace_back(pairs[i], pairs[i + 1]);
      }
    }
  }
  PickleRef object(PickleRef callable, PickleRef args, std::size_t at) {
    fail_unless(callable->kind == Kind::kGlobal, at, "calling a ", callable->kind_name(), ", not a class or function");
    fail_unless(args->kind == Kind::kTuple, at, "arguments that are a ", args->kind_name(), ", not a tuple");
    auto o = py::empty(Kind::kObject);
    o->callable = std::move(callable);
    o->args = std::move(args);
    return o;
  }
  // Python's own value for the constructions of builtins that pickle writes at protocols 2 and 3
  // (bytes as _codecs.encode(text, 'latin1'), bytes(), bytearray(b), set(list), frozenset(list));
  // any other object stays a placeholder.
  static PickleRef plain_value(PickleRef o) {
    std::string name = o->class_name();
    if (name.starts_with("__builtin__.")) name = "builtins." + name.substr(12);
    const auto& a = o->args->items;
    if (name == "_codecs.encode" && a.size() == 2 && a[0]->kind == Kind::kString && a[1]->kind == Kind::kString &&
        a[1]->text == "latin1") {
      std::string bytes;  // the text's code points (all below 256) as bytes
      for (std::size_t i = 0; i < a[0]->text.size();) {
        const auto c = static_cast<unsigned char>(a[0]->text[i]);
        if (c < 0x80) {
          bytes += static_cast<char>(c);
          ++i;
        } else if ((c & 0xE0) == 0xC0 && i + 1 < a[0]->text.size()) {
          bytes += static_cast<char>(((c & 0x1F) << 6) | (static_cast<unsigned char>(a[0]->text[i + 1]) & 0x3F));
          i += 2;
        } else {
          return o;  // not latin-1: left as it is
        }
      }
      return py::bytes(std::move(bytes));
    }
    if ((name == "builtins.bytes" || name == "builtins.bytearray") && a.empty()) return py::empty(Kind::kBytes);
    if (name == "builtins.bytearray" && a.size() == 1 && a[0]->kind == Kind::kBytes) return a[0];
    if ((name == "builtins.set" || name == "builtins.frozenset") && a.size() == 1 && a[0]->kind == Kind::kList) {
      auto s = py::empty(name == "builtins.set" ? Kind::kSet : Kind::kFrozenSet);
      s->items = a[0]->items;
      return s;
    }
    return o;
  }
  void memo_put(std::uint64_t index, std::size_t at) { memo_[index] = top(at); }
  void memo_get(std::uint64_t index, std::size_t at) {
    const auto it = memo_.find(index);
    fail_unless(it != memo_.end(), at, "memo entry ", index, " was never stored");
    stack_.push_back(it->second);
  }
  std::int64_t decimal(std::string_view text, std::size_t at) {
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    fail_unless(ec == std::errc() && end == text.data() + text.size(), at, "'", text, "' is not a whole number");
    return v;
  }

  void step(unsigned char op, std::size_t at);
  void step_containers(unsigned char op, std::size_t at);
  void step_objects(unsigned char op, std::size_t at);

  std::string_view in_;
  const std::string& where_;
  std::size_t pos_ = 0;
  std::vector<PickleRef> stack_;
  std::vector<std::size_t> marks_;
  std::map<std::uint64_t, PickleRef> memo_;
};

void Machine::step(unsigned char op, std::size_t at) {
  switch (op) {
    case 0x80: take(1); return;                                   // PROTO
    case 0x95: take(8); return;                                   // FRAME: a size hint
    case '(': marks_.push_back(stack_.size()); return;            // MARK
    case '0': pop(at); return;                                    // POP
    case '1': pop_mark(at); return;                               // POP_MARK
    case '2': stack_.push_back(top(at)); return;                  // DUP
    case 'N': stack_.push_back(py::empty(Kind::kNone)); return;        // NONE
    case 0x88: case 0x89: {                                       // NEWTRUE, NEWFALSE
      auto b = py::empty(Kind::kBool);
      b->boolean = op == 0x88;
      stack_.push_back(b);
      return;
    }
    case 'J': stack_.push_back(py::integer(little<std::int32_t>())); return;   // BININT
    case 'K': stack_.push_back(py::integer(little<std::uint8_t>())); return;   // BININT1
    case 'M': stack_.push_back(py::integer(little<std::uint16_t>())); return;  // BININT2
    case 'I': {                                                   // INT (protocol 0; "01"/"00": bools)
      const std::string_view text = line();
      if (text == "01" || text == "00") {
        auto b = py::empty(Kind::kBool);
        b->boolean = text == "01";
        stack_.push_back(b);
      } else {
        stack_.push_back(py::integer(decimal(text, at)));
      }
      return;
    }
    case 'L': {                                                   // LONG (protocol 0): digits then 'L'
      std::string_view text = line();
      if (text.ends_with('L')) text.remove_suffix(1);
      stack_.push_back(py::integer(decimal(text, at)));
      return;
    }
    case 0x8a: stack_.push_back(make_long(take(length(1)))); return;  // LONG1
    case 0x8b: stack_.push_back(make_long(take(length(4)))); return;  // LONG4
    case 'G': {                                                   // BINFLOAT: big-endian
      auto f = py::empty(Kind::kFloat);
      std::uint64_t u = 0;
      for (const char c : take(8)) u = (u << 8) | static_cast<unsigned char>(c);
      f->real = std::bit_cast<double>(u);
      stack_.push_back(f);
      return;
    }
    case 'F': {                                                   // FLOAT (protocol 0)
      const auto value = parse_python_float(line());
      fail_unless(value.has_value(), at, "FLOAT that is not a number");
      auto f = py::empty(Kind::kFloat);
      f->real = *value;
      stack_.push_back(f);
      return;
    }
    case 'X': stack_.push_back(py::str(std::string(take(length(4))))); return;     // BINUNICODE
    case 0x8c: stack_.push_back(py::str(std::string(take(length(1))))); return;  // SHORT_BINUNICODE
    case 0x8d: stack_.push_back(py::str(std::string(take(length(8))))); return;  // BINUNICODE8
    case 'T': stack_.push_back(py::str(std::string(take(length(4))))); return;     // BINSTRING (py2 str)
    case 'U': stack_.push_back(py::str(std::string(take(length(1))))); return;     // SHORT_BINSTRING
    case 'B': stack_.push_back(py::bytes(std::string(take(length(4))))); return;      // BINBYTES
    case 'C': stack_.push_back(py::bytes(std::string(take(length(1))))); return;      // SHORT_BINBYTES
    case 0x8e: case 0x96:                                         // BINBYTES8, BYTEARRAY8
      stack_.push_back(py::bytes(std::string(take(length(8)))));
      return;
    case 'p': memo_put(static_cast<std::uint64_t>(decimal(line(), at)), at); return;  // PUT
    case 'q': memo_put(little<std::uint8_t>(), at); return;                           // BINPUT
    case 'r': memo_put(little<std::uint32_t>(), at); return;                          // LONG_BINPUT
    case 0x94: memo_put(memo_.size(), at); return;                                    // MEMOIZE
    case 'g': memo_get(static_cast<std::uint64_t>(decimal(line(), at)), at); return;  // GET
    case 'h': memo_get(little<std::uint8_t>(), at); return;                           // BINGET
    case 'j': memo_get(little<std::uint32_t>(), at); return;                          // LONG_BINGET
    default: step_containers(op, at);
  }
}

void Machine::step_containers(unsigned char op, std::size_t at) {
  switch (op) {
    case ']': stack_.push_back(py::empty(Kind::kList)); return;       // EMPTY_LIST
    case ')': stack_.push_back(py::empty(Kind::kTuple)); return;      // EMPTY_TUPLE
    case '}': stack_.push_back(py::empty(Kind::kDict)); return;       // EMPTY_DICT
    case 0x8f: stack_.push_back(py::empty(Kind::kSet)); return;       // EMPTY_SET
    case 'l': {                                                  // LIST
      auto l = py::empty(Kind::kList);
      l->items = pop_mark(at);
      stack_.push_back(l);
      return;
    }
    case 't': stack_.push_back(tuple(pop_mark(at))); return;     // TUPLE
    case 0x85: case 0x86: case 0x87: {                           // TUPLE1, TUPLE2, TUPLE3
      const std::size_t n = op - 0x84u;
      fail_unless(stack_.size() >= n + (marks_.empty() ? 0 : marks_.back()), at, "TUPLE", n, " on a short stack");
      std::vector<PickleRef> items(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
      stack_.resize(stack_.size() - n);
      stack_.push_back(tuple(std::move(items)));
      return;
    }
    case 0x91: {                                                 // FROZENSET
      auto s = py::empty(Kind::kFrozenSet);
      s->items = pop_mark(at);
      stack_.push_back(s);
      return;
    }
    case 'd': {                                                  // DICT
      auto d = py::empty(Kind::kDict);
      set_items(*d, pop_mark(at), at);
      stack_.push_back(d);
      return;
    }
    case 'a': {                                                  // APPEND
      PickleRef item = pop(at);
      add_items(*top(at), {std::move(item)}, at);
      return;
    }
    case 'e': case 0x90: {                                       // APPENDS, ADDITEMS
      std::vector<PickleRef> items = pop_mark(at);
      add_items(*top(at), std::move(items), at);
      return;
    }
    case 's': {                                                  // SETITEM
      PickleRef value = pop(at);
      PickleRef key = pop(at);
      set_items(*top(at), {key, value}, at);
      return;
    }
    case 'u': {                                                  // SETITEMS
      const std::vector<PickleRef> pairs = pop_mark(at);
      set_items(*top(at), pairs, at);
      return;
    }
    default: step_objects(op, at);
  }
}

void Machine::step_objects(unsigned char op, std::size_t at) {
  switch (op) {
    case 'c': {                                                  // GLOBAL: "module\nname\n"
      const std::string module(line());
      stack_.push_back(py::global(module + "." + std::string(line())));
      return;
    }
    case 0x93: {                                                 // STACK_GLOBAL
      const PickleRef name = pop(at), module = pop(at);
      fail_unless(name->kind == Kind::kString && module->kind == Kind::kString, at, "STACK_GLOBAL without two strs");
      stack_.push_back(py::global(module->text + "." + name->text));
      return;
    }
    case 'R': case 0x81: {                                       // REDUCE, NEWOBJ
      PickleRef args = pop(at);
      PickleRef callable = pop(at);
      PickleRef o = object(std::move(callable), std::move(args), at);
      o->constructed = op == 0x81;
      stack_.push_back(plain_value(std::move(o)));
      return;
    }
    case 0x92: {                                                 // NEWOBJ_EX: cls, args, kwargs
      PickleRef kwargs = pop(at);
      PickleRef args = pop(at);
      PickleRef callable = pop(at);
      PickleRef o = object(std::move(callable), std::move(args), at);
      o->constructed = true;
      if (kwargs->kind == Kind::kDict && !kwargs->entries.empty()) o->state = kwargs;
      stack_.push_back(std::move(o));
      return;
    }
    case 'o': {                                                  // OBJ (protocol 1): MARK cls args...
      std::vector<PickleRef> values = pop_mark(at);
      fail_unless(!values.empty(), at, "OBJ without a class");
      PickleRef callable = values.front();
      values.erase(values.begin());
      stack_.push_back(object(std::move(callable), tuple(std::move(values)), at));
      return;
    }
    case 'b': {                                                  // BUILD
      PickleRef state = pop(at);
      PickleRef& target = top(at);
      fail_unless(target->kind == Kind::kObject, at, "BUILD on a ", target->kind_name());
      target->state = std::move(state);
      return;
    }
    case 'Q': {                                                  // BINPERSID
      auto p = py::empty(Kind::kPersistentId);
      p->items.push_back(pop(at));
      stack_.push_back(std::move(p));
      return;
    }
    case 'P': {                                                  // PERSID
      auto p = py::empty(Kind::kPersistentId);
      p->items.push_back(py::str(std::string(line())));
      stack_.push_back(std::move(p));
      return;
    }
    case 0x82: case 0x83: case 0x84:
      fail(at, "EXT", op == 0x82 ? 1 : op == 0x83 ? 2 : 4, " (the extension registry) is not read");
    case 0x97: case 0x98:
      fail(at, "out-of-band buffers (", op == 0x97 ? "NEXT_BUFFER" : "READONLY_BUFFER", ") are not read");
    default:
      fail(at, "opcode 0x", std::string(1, "0123456789abcdef"[op >> 4]) + "0123456789abcdef"[op & 15],
           " is not one of pickle protocols 2-5's");
  }
}

}  // namespace

PickleRef read_pickle(std::string_view bytes, const std::string& where) { return Machine(bytes, where).run(); }

}  // namespace megatron::checkpoint
