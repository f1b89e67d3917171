// torch.save archives (see torch_save.h): LibTorch's PyTorchStreamReader for the zip records over a
// byte range of a file, read_pickle for data.pkl, and the tensors rebuilt from their storages by
// what torch._utils._rebuild_tensor_v2's arguments say.
#include "megatron/checkpoint/torch_save.h"

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <map>

#include "megatron/core/check.h"
#include "megatron/core/strings.h"

namespace megatron::checkpoint {
namespace {

using Kind = PickleValue::Kind;

// The bytes [offset, offset + size) of a file, read where asked (pread): only what the zip reader
// touches is read.
class FileRange final : public caffe2::serialize::ReadAdapterInterface {
 public:
  FileRange(const std::string& path, std::uint64_t offset, std::optional<std::uint64_t> length, std::string where)
      : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)), offset_(offset), where_(std::move(where)) {
    MEGATRON_CHECK(fd_ >= 0, where_, ": cannot open the file");
    const off_t end = ::lseek(fd_, 0, SEEK_END);
    MEGATRON_CHECK(end >= 0, where_, ": cannot read the file's size");
    const auto file_size = static_cast<std::uint64_t>(end);
    MEGATRON_CHECK(offset <= file_size && (!length || *length <= file_size - offset), where_,
                   ": the range ends past the end of the file (", file_size, " bytes)");
    size_ = length ? *length : file_size - offset;
  }
  ~FileRange() override { ::close(fd_); }
  size_t size() const override { return size_; }
  size_t read(uint64_t pos, void* buf, size_t n, const char*) const override {
    if (pos >= size_) return 0;
    n = static_cast<size_t>(std::min<std::uint64_t>(n, size_ - pos));
    size_t done = 0;
    while (done < n) {
      const ssize_t got = ::pread(fd_, static_cast<char*>(buf) + done, n - done, static_cast<off_t>(offset_ + pos + done));
      if (got <= 0) break;
      done += static_cast<size_t>(got);
    }
    return done;
  }

 private:
  int fd_;
  std::uint64_t offset_, size_ = 0;
  std::string where_;
};

std::string range_name(const std::string& path, std::uint64_t offset, std::optional<std::uint64_t> length) {
  return length ? str_cat(path, " bytes [", offset, ", ", offset + *length, ")") : path;
}

// Bytes held in memory.
class Memory final : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit Memory(std::string bytes) : bytes_(std::move(bytes)) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char*) const override {
    if (pos >= bytes_.size()) return 0;
    n = static_cast<size_t>(std::min<std::uint64_t>(n, bytes_.size() - pos));
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

 private:
  std::string bytes_;
};

// torch.save's typed storage classes by name.
const std::map<std::string, at::ScalarType>& storage_types() {
  static const std::map<std::string, at::ScalarType> types = {
      {"torch.FloatStorage", at::kFloat},   {"torch.DoubleStorage", at::kDouble}, {"torch.HalfStorage", at::kHalf},
      {"torch.BFloat16Storage", at::kBFloat16}, {"torch.LongStorage", at::kLong}, {"torch.IntStorage", at::kInt},
      {"torch.ShortStorage", at::kShort},   {"torch.CharStorage", at::kChar},     {"torch.ByteStorage", at::kByte},
      {"torch.BoolStorage", at::kBool}};
  return types;
}

// torch's dtypes by their names in pickles, the canonical name first.
const std::vector<std::pair<std::string, at::ScalarType>>& dtype_globals() {
  static const std::vector<std::pair<std::string, at::ScalarType>> types = {
      {"torch.float32", at::kFloat}, {"torch.float", at::kFloat},   {"torch.float64", at::kDouble},
      {"torch.double", at::kDouble}, {"torch.float16", at::kHalf},  {"torch.half", at::kHalf},
      {"torch.bfloat16", at::kBFloat16}, {"torch.int64", at::kLong}, {"torch.long", at::kLong},
      {"torch.int32", at::kInt},     {"torch.int", at::kInt},       {"torch.int16", at::kShort},
      {"torch.int8", at::kChar},     {"torch.uint8", at::kByte},    {"torch.bool", at::kBool}};
  return types;
}

}  // namespace

std::string dtype_global(at::ScalarType dtype) {
  for (const auto& [name, type] : dtype_globals()) {
    if (type == dtype) return name;
  }
  MEGATRON_FAIL("no torch dtype name for ", at::toString(dtype), " tensors");
}

std::optional<at::ScalarType> dtype_of_global(const std::string& name) {
  for (const auto& [n, type] : dtype_globals()) {
    if (n == name) return type;
  }
  return std::nullopt;
}

std::string storage_class(at::ScalarType dtype) {
  for (const auto& [name, type] : storage_types()) {
    if (type == dtype) return name;
  }
  MEGATRON_FAIL("torch.save has no storage class for ", at::toString(dtype), " tensors");
}

namespace {

std::vector<std::int64_t> int_tuple(const PickleValue& v, const std::string& where, const char* what) {
  MEGATRON_CHECK(v.kind == Kind::kTuple || v.kind == Kind::kList || v.class_name() == "torch.Size", where, ": a tensor's ",
                 what, " is a ", v.kind_name(), ", not a tuple");
  const PickleValue& t = v.kind == Kind::kObject && !v.args->items.empty() ? *v.args->items[0] : v;  // torch.Size((...))
  std::vector<std::int64_t> out;
  for (const auto& item : t.items) {
    MEGATRON_CHECK(item->kind == Kind::kInt, where, ": a tensor's ", what, " holds a ", item->kind_name());
    out.push_back(item->integer);
  }
  return out;
}

}  // namespace

struct TorchSaveArchive::Impl {
  std::shared_ptr<caffe2::serialize::ReadAdapterInterface> input;
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader;
  mutable std::map<std::string, at::Tensor> storages;  // by key, as read
};

TorchSaveArchive::TorchSaveArchive(const std::string& path, std::uint64_t offset, std::optional<std::uint64_t> length)
    : TorchSaveArchive(std::make_shared<FileRange>(path, offset, length, range_name(path, offset, length)),
                       range_name(path, offset, length)) {}

TorchSaveArchive TorchSaveArchive::from_bytes(std::string bytes, const std::string& where) {
  return TorchSaveArchive(std::make_shared<Memory>(std::move(bytes)), where);
}

TorchSaveArchive::TorchSaveArchive(std::shared_ptr<caffe2::serialize::ReadAdapterInterface> input, std::string where)
    : impl_(std::make_unique<Impl>()), where_(std::move(where)) {
  std::string pickle;
  try {
    impl_->input = input;
    impl_->reader = std::make_unique<caffe2::serialize::PyTorchStreamReader>(std::move(input));
    if (impl_->reader->hasRecord("byteorder")) {
      const auto [data, size] = impl_->reader->getRecord("byteorder");
      const std::string order(static_cast<const char*>(data.get()), size);
      MEGATRON_CHECK(order == "little", where_, ": saved on a ", order, "-endian machine; only little-endian is read");
    }
    MEGATRON_CHECK(impl_->reader->hasRecord("data.pkl"), where_, ": a zip without data.pkl, not a torch.save archive");
    const auto [data, size] = impl_->reader->getRecord("data.pkl");
    pickle.assign(static_cast<const char*>(data.get()), size);
  } catch (const c10::Error& e) {
    MEGATRON_FAIL(where_, ": not a readable torch.save archive (", e.msg(), ")");
  }
  root_ = read_pickle(pickle, where_ + " (data.pkl)");
}

TorchSaveArchive::~TorchSaveArchive() = default;
TorchSaveArchive::TorchSaveArchive(TorchSaveArchive&&) noexcept = default;
TorchSaveArchive& TorchSaveArchive::operator=(TorchSaveArchive&&) noexcept = default;

bool TorchSaveArchive::is_tensor(const PickleValue& v) {
  const std::string name = v.class_name();
  return v.kind == Kind::kObject && (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_parameter");
}

// A tensor as _rebuild_tensor_v2's arguments describe it, checked against its storage's size.
struct TorchSaveArchive::View {
  std::string key;  // the storage's record: data/<key>
  at::ScalarType dtype = at::kFloat;
  std::int64_t numel = 0;  // of the storage
  std::int64_t offset = 0;
  std::vector<std::int64_t> size, stride;
};

TorchSaveArchive::View TorchSaveArchive::view(const PickleValue& v) const {
  MEGATRON_CHECK(is_tensor(v), where_, ": expected a tensor, found a ", v.kind_name());
  const auto& a = v.args->items;
  if (v.class_name() == "torch._utils._rebuild_parameter") {  // (data, requires_grad, backward_hooks)
    MEGATRON_CHECK(!a.empty(), where_, ": a Parameter without its data");
    return view(*a[0]);
  }
  // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
  MEGATRON_CHECK(a.size() >= 4 && a[0]->kind == Kind::kPersistentId && a[1]->kind == Kind::kInt, where_,
                 ": a tensor whose arguments are not (storage, offset, size, stride, ...)");
  const PickleValue& id = *a[0]->items.at(0);
  // ('storage', storage class, key, location, number of elements)
  MEGATRON_CHECK(id.kind == Kind::kTuple && id.items.size() == 5 && id.items[0]->text == "storage" &&
                     id.items[2]->kind == Kind::kString && id.items[4]->kind == Kind::kInt,
                 where_, ": a storage reference that is not ('storage', class, key, location, size): ", id.repr(3));
  const std::string type_name = id.items[1]->class_name();
  const auto type = storage_types().find(type_name);
  MEGATRON_CHECK(type != storage_types().end(), where_, ": storage class ", type_name, " is not read");
  View out{id.items[2]->text, type->second, id.items[4]->integer, a[1]->integer, int_tuple(*a[2], where_, "size"),
           int_tuple(*a[3], where_, "stride")};
  MEGATRON_CHECK(out.size.size() == out.stride.size(), where_, ": a tensor of ", out.size.size(), " sizes and ",
                 out.stride.size(), " strides");
  std::int64_t last = out.offset;  // the furthest element the view reaches
  for (std::size_t d = 0; d < out.size.size(); ++d) {
    MEGATRON_CHECK(out.size[d] >= 0 && out.stride[d] >= 0, where_, ": a tensor with a negative size or stride");
    if (out.size[d] == 0) last = out.offset - 1;  // empty
    std::int64_t reach = 0;
    MEGATRON_CHECK(out.size[d] == 0 || !__builtin_mul_overflow(out.size[d] - 1, out.stride[d], &reach), where_,
                   ": a tensor's size and stride overflow");
    if (out.size[d] > 0 && last >= out.offset) {
      MEGATRON_CHECK(!__builtin_add_overflow(last, reach, &last), where_, ": a tensor's size and stride overflow");
    }
  }
  MEGATRON_CHECK(out.offset >= 0 && out.numel >= 0 && last < out.numel, where_, ": a tensor reaches element ", last,
                 " of storage ", out.key, ", which has ", out.numel);
  const std::string record = "data/" + out.key;
  MEGATRON_CHECK(impl_->reader->hasRecord(record), where_, ": storage ", out.key, " is missing (no record ", record, ")");
  const auto element = static_cast<std::int64_t>(c10::elementSize(out.dtype));
  std::size_t stored = 0;
  try {
    stored = impl_->reader->getRecordSize(record);
  } catch (const c10::Error& e) {
    MEGATRON_FAIL(where_, ": storage ", out.key, " cannot be read (", e.msg(), ")");
  }
  MEGATRON_CHECK(static_cast<std::int64_t>(stored) == out.numel * element, where_, ": storage ", out.key, " holds ",
                 stored, " bytes, not the ", out.numel, " x ", element, " it says");
  return out;
}

TorchSaveArchive::TensorInfo TorchSaveArchive::info(const PickleValue& v) const {
  const View w = view(v);
  return {w.dtype, w.size};
}

at::Tensor TorchSaveArchive::tensor(const PickleValue& v) const {
  const View w = view(v);
  at::Tensor& storage = impl_->storages[w.key];
  if (!storage.defined()) {
    at::Tensor bytes = at::empty({w.numel}, at::TensorOptions().dtype(w.dtype));
    try {
      impl_->reader->getRecord("data/" + w.key, bytes.data_ptr(), bytes.nbytes());
    } catch (const c10::Error& e) {
      MEGATRON_FAIL(where_, ": storage ", w.key, " cannot be read (", e.msg(), ")");
    }
    storage = bytes;
  }
  MEGATRON_CHECK(storage.scalar_type() == w.dtype, where_, ": storage ", w.key, " is read as two dtypes");
  return storage.as_strided(w.size, w.stride, w.offset).clone();
}

at::Tensor TorchSaveArchive::block(const PickleValue& v, const std::vector<std::int64_t>& offsets,
                                   const std::vector<std::int64_t>& sizes) const {
  at::Tensor out = at::empty(sizes, at::TensorOptions().dtype(view(v).dtype));
  block_into(v, offsets, sizes, out);
  return out;
}

void TorchSaveArchive::block_into(const PickleValue& v, const std::vector<std::int64_t>& offsets,
                                  const std::vector<std::int64_t>& sizes, at::Tensor& dst) const {
  const View w = view(v);
  MEGATRON_CHECK(offsets.size() == w.size.size() && sizes.size() == w.size.size(), where_, ": a block of ",
                 offsets.size(), " dimensions asked of a tensor of ", w.size.size());
  MEGATRON_CHECK(dst.sizes() == at::IntArrayRef(sizes) && dst.scalar_type() == w.dtype && dst.device().is_cpu(),
                 where_, ": a block of ", at::IntArrayRef(sizes), " ", w.dtype, " read into a ", dst.sizes(), " ",
                 dst.scalar_type(), " tensor");
  std::int64_t first = w.offset, span = 1;  // the block's first element in the storage, and how far it reaches
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    MEGATRON_CHECK(offsets[d] >= 0 && sizes[d] >= 0 && offsets[d] + sizes[d] <= w.size[d], where_,
                   ": block [", at::IntArrayRef(offsets), ", +", at::IntArrayRef(sizes), ") is outside the tensor's ",
                   at::IntArrayRef(w.size));
    if (sizes[d] == 0) return;
    first += offsets[d] * w.stride[d];
    span += (sizes[d] - 1) * w.stride[d];
  }
  // Only the bytes from the block's first element to its last: the record is stored uncompressed
  // (torch.save writes its zip so), its data at getRecordOffset. A block that is all of that span
  // in the destination's order (a whole chunk, rows of one) is read straight into the destination:
  // one pass over its memory.
  const auto element = static_cast<std::int64_t>(c10::elementSize(w.dtype));
  bool row_major = true;  // the block's elements in the storage in row-major order, none skipped
  for (std::int64_t d = static_cast<std::int64_t>(sizes.size()) - 1, step = 1; d >= 0; --d) {
    const auto i = static_cast<std::size_t>(d);
    row_major = row_major && (sizes[i] == 1 || w.stride[i] == step);
    step *= sizes[i];
  }
  const bool direct = row_major && span == dst.numel() && dst.is_contiguous();
  at::Tensor bytes = direct ? dst : at::empty({span}, at::TensorOptions().dtype(w.dtype));
  std::size_t got = 0;
  try {
    const std::size_t start = impl_->reader->getRecordOffset("data/" + w.key) + static_cast<std::size_t>(first * element);
    got = impl_->input->read(start, bytes.data_ptr(), static_cast<std::size_t>(span * element), "tensor block");
  } catch (const c10::Error& e) {
    MEGATRON_FAIL(where_, ": storage ", w.key, " cannot be read (", e.msg(), ")");
  }
  MEGATRON_CHECK(got == static_cast<std::size_t>(span * element), where_, ": storage ", w.key, " ends early");
  if (!direct) dst.copy_(bytes.as_strided(sizes, w.stride, 0));
}

}  // namespace megatron::checkpoint
