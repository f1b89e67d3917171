// Reading Python pickles (protocols 2 to 5, as torch.save and torch.distributed.checkpoint write
// them) into a tree of plain values, without executing anything: a class or function the pickle
// names is a named placeholder (kGlobal), and calling or instantiating one (REDUCE, NEWOBJ) is a
// placeholder object holding the callable's name, its arguments and the state BUILD gives it.
// What such an object means (an OrderedDict, an argparse.Namespace, a tensor) is the reader's
// business, by name; an unknown class is never run. And the way back: write_pickle writes such a
// tree (Megatron's checkpoint files: DCP metadata, an args Namespace, torch.save's tensors).
// Written by hand: no C++ library reads or writes pickles of arbitrary classes without a Python
// interpreter (LibTorch's pickler and unpickler know only the classes TorchScript knows).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace megatron::checkpoint {

class PickleValue;
using PickleRef = std::shared_ptr<PickleValue>;

class PickleValue {
 public:
  enum class Kind {
    kNone, kBool, kInt, kBigInt, kFloat, kString, kBytes, kList, kTuple, kDict, kSet, kFrozenSet,
    kGlobal,        // a class or function by name (`text` "module.name"): never looked up
    kObject,        // `callable(*args)` (REDUCE) or `callable.__new__(callable, *args)` (NEWOBJ), then BUILD
    kPersistentId,  // persistent_load(items[0]): torch.save's storages
  };
  Kind kind = Kind::kNone;
  bool boolean = false;
  std::int64_t integer = 0;
  double real = 0.0;
  // kString (UTF-8), kBytes; kBigInt: little-endian two's complement; kGlobal: "module.name".
  std::string text;
  // kList, kTuple, kSet, kFrozenSet elements; kObject: items APPENDed to it; kPersistentId: its id.
  std::vector<PickleRef> items;
  // kDict entries in order; kObject: items SETITEMed on it (an OrderedDict's).
  std::vector<std::pair<PickleRef, PickleRef>> entries;
  // kObject: the kGlobal called, its argument tuple, and BUILD's state (nullptr: none).
  PickleRef callable, args, state;
  // kObject: made by NEWOBJ (`callable.__new__(callable, *args)`, how pickle saves an instance of
  // a class) rather than REDUCE (a call).
  bool constructed = false;

  // For messages: "int", "str", "collections.OrderedDict object", ...
  std::string kind_name() const;
  // "module.name" of a kGlobal, or of a kObject's callable when it is a kGlobal; "" otherwise.
  std::string class_name() const;
  // The value under a str key of a kDict, or of a kObject's dict state or set items; nullptr when
  // absent.
  const PickleValue* find(std::string_view key) const;
  // Python's repr-like rendering (dicts in order, objects as "module.name(args){state}"), for
  // tests and messages; `depth` bounds the nesting printed.
  std::string repr(int depth = 64) const;
};

// Reads one pickle (up to its STOP). Throws megatron::Error naming `where` and the byte offset for
// malformed or truncated input, an opcode outside protocols 0-5, out-of-band buffers and the
// extension registry (EXT1/2/4), which checkpoints never use. Every length is checked against the
// bytes left; a value may contain itself (through the memo), which repr() cuts at its depth.
PickleRef read_pickle(std::string_view bytes, const std::string& where);

// Writes `value` as a protocol-2 pickle, torch.save's (what Python's pickle.load and torch.load, also
// with weights_only, read): values and containers by their opcodes (bytes as pickle writes them at
// protocol 2: _codecs.encode(text, 'latin1')), a kGlobal as GLOBAL, a kObject as
// its callable and argument tuple with NEWOBJ (`constructed`) or REDUCE, then BUILD with its state
// and its SETITEMS / APPENDS, a kPersistentId as BINPERSID of its id. No memo: a value shared or
// contained twice is written twice, and one containing itself is refused (megatron::Error).
std::string write_pickle(const PickleValue& value);

// Values built in the shape read_pickle gives them (the reader builds its values with these too).
namespace py {
PickleRef empty(PickleValue::Kind kind);  // a value of `kind` with nothing in it
PickleRef none();
PickleRef boolean(bool b);
PickleRef integer(std::int64_t i);
PickleRef big_integer(std::string twos_complement);  // little-endian, wider than 64 bits
PickleRef real(double d);
PickleRef str(std::string s);
PickleRef bytes(std::string b);
PickleRef tuple(std::vector<PickleRef> items);
PickleRef list(std::vector<PickleRef> items);
PickleRef dict(std::vector<std::pair<PickleRef, PickleRef>> entries);
PickleRef global(std::string dotted);  // "module.name", split at the last dot
// `callable(*args)` (REDUCE).
PickleRef call(const std::string& callable, std::vector<PickleRef> args);
// An instance of class `cls` (NEWOBJ with `args`), its BUILD state `state` (nullptr: none).
PickleRef instance(const std::string& cls, PickleRef state, std::vector<PickleRef> args = {});
PickleRef persistent_id(PickleRef id);
}  // namespace py

}  // namespace megatron::checkpoint
