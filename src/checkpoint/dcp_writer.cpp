// Writing DCP folders (see dcp.h): items streamed into each writer's file, and the `.metadata`
// pickle in the shape torch.distributed.checkpoint.metadata's dataclasses pickle themselves
// (NEWOBJ of the class, BUILD with its fields), so that torch's own reader loads it.
#include <filesystem>
#include <map>

#include "megatron/checkpoint/dcp.h"
#include "megatron/checkpoint/pickle.h"
#include "megatron/checkpoint/torch_save.h"
#include "megatron/core/check.h"
#include "megatron/core/file_io.h"

namespace megatron::checkpoint {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kMetadataModule = "torch.distributed.checkpoint.metadata.";

PickleRef torch_size(const std::vector<std::int64_t>& dims) {
  std::vector<PickleRef> items;
  for (const std::int64_t d : dims) items.push_back(py::integer(d));
  return py::call("torch.Size", {py::tuple(std::move(items))});
}

PickleRef fields(std::vector<std::pair<std::string, PickleRef>> named) {
  std::vector<std::pair<PickleRef, PickleRef>> entries;
  for (auto& [name, value] : named) entries.emplace_back(py::str(name), std::move(value));
  return py::dict(std::move(entries));
}

PickleRef dcp_object(const std::string& cls, PickleRef state) {
  return py::instance(kMetadataModule + cls, std::move(state));
}

// TensorProperties pickles its state as (dtype, layout, requires_grad, memory_format, pin_memory).
PickleRef tensor_properties(at::ScalarType dtype) {
  return dcp_object("TensorProperties",
                    py::tuple({py::global(dtype_global(dtype)),
                               py::call("torch.serialization._get_layout", {py::str("torch.strided")}),
                               py::boolean(false),
                               py::call(std::string(kMetadataModule) + "_MEM_FORMAT_ENCODING", {py::integer(0)}),
                               py::boolean(false)}));
}

}  // namespace

json DcpEntry::to_json() const {
  return {{"key", key}, {"bytes", is_bytes}, {"dtype", static_cast<int>(dtype)}, {"size", size},
          {"offsets", offsets}, {"sizes", sizes}, {"file", item.file}, {"offset", item.offset},
          {"length", item.length}};
}

DcpEntry DcpEntry::from_json(const json& j) {
  try {
    DcpEntry e;
    e.key = j.at("key").get<std::string>();
    e.is_bytes = j.at("bytes").get<bool>();
    e.dtype = static_cast<at::ScalarType>(j.at("dtype").get<int>());
    e.size = j.at("size").get<std::vector<std::int64_t>>();
    e.offsets = j.at("offsets").get<std::vector<std::int64_t>>();
    e.sizes = j.at("sizes").get<std::vector<std::int64_t>>();
    e.item = {j.at("file").get<std::string>(), j.at("offset").get<std::uint64_t>(), j.at("length").get<std::uint64_t>()};
    return e;
  } catch (const json::exception& ex) {
    MEGATRON_FAIL("a distributed-checkpoint item record is malformed (", ex.what(), "): ", j.dump());
  }
}

struct DcpFileWriter::Impl {
  std::string file;
  AtomicFile out;
  std::vector<DcpEntry> entries;
  Impl(const std::string& folder, std::string name)
      : file(std::move(name)), out((fs::path(folder) / file).string(), AtomicFile::Mode::kStreaming) {}
  DcpItem append(const std::function<void(const TorchSaveWriter::Sink&)>& write) {
    const std::uint64_t start = out.size();
    write([this](const void* data, std::size_t n) { out.write(data, n); });
    return {file, start, out.size() - start};
  }
};

DcpFileWriter::DcpFileWriter(const std::string& folder, std::string file)
    : impl_(std::make_unique<Impl>(folder, std::move(file))) {}
DcpFileWriter::~DcpFileWriter() = default;

void DcpFileWriter::add_tensor(const std::string& key, std::vector<std::int64_t> size, std::vector<std::int64_t> offsets,
                               const at::Tensor& chunk) {
  MEGATRON_CHECK(size.size() == static_cast<std::size_t>(chunk.dim()) && offsets.size() == size.size(),
                 "distributed checkpoint: the chunk of ", key, " has another rank than its global shape");
  DcpEntry e{key, false, chunk.scalar_type(), std::move(size), std::move(offsets), chunk.sizes().vec(), {}};
  for (std::size_t d = 0; d < e.size.size(); ++d) {
    MEGATRON_CHECK(e.offsets[d] >= 0 && e.offsets[d] + e.sizes[d] <= e.size[d], "distributed checkpoint: the chunk of ",
                   key, " at ", at::IntArrayRef(e.offsets), " of shape ", at::IntArrayRef(e.sizes),
                   " lies outside its global shape ", at::IntArrayRef(e.size));
  }
  TorchSaveWriter archive;
  const PickleRef root = archive.tensor(chunk);
  e.item = impl_->append([&](const TorchSaveWriter::Sink& sink) { archive.write(*root, sink); });
  impl_->entries.push_back(std::move(e));
}

void DcpFileWriter::add_bytes(const std::string& key, const std::string& bytes) {
  DcpEntry e;
  e.key = key;
  e.is_bytes = true;
  e.item = impl_->append([&](const TorchSaveWriter::Sink& sink) { sink(bytes.data(), bytes.size()); });
  impl_->entries.push_back(std::move(e));
}

std::vector<DcpEntry> DcpFileWriter::commit() {
  impl_->out.commit();
  return std::move(impl_->entries);
}

void write_dcp_metadata(const std::string& folder, const std::vector<DcpEntry>& entries) {
  // Per key, in the order first seen: its metadata (tensor: dtype, shape, chunks) ...
  struct Key {
    const DcpEntry* first = nullptr;
    std::vector<const DcpEntry*> chunks;
  };
  std::vector<std::string> order;
  std::map<std::string, Key> keys;
  for (const DcpEntry& e : entries) {
    auto [it, added] = keys.try_emplace(e.key);
    if (added) {
      order.push_back(e.key);
      it->second.first = &e;
    }
    const DcpEntry& first = *it->second.first;
    MEGATRON_CHECK(first.is_bytes == e.is_bytes && (e.is_bytes || (first.dtype == e.dtype && first.size == e.size)),
                   folder, ": the writers disagree on ", e.key, " (", e.item.file, " and ", first.item.file,
                   " give it another kind, dtype or global shape)");
    MEGATRON_CHECK(!e.is_bytes || added, folder, ": bytes item ", e.key, " written twice (", e.item.file, " and ",
                   first.item.file, ")");
    for (const DcpEntry* other : it->second.chunks) {
      MEGATRON_CHECK(other->offsets != e.offsets, folder, ": the chunk of ", e.key, " at ", at::IntArrayRef(e.offsets),
                     " is written twice (", e.item.file, " and ", other->item.file, ")");
    }
    it->second.chunks.push_back(&e);
  }
  std::vector<std::pair<PickleRef, PickleRef>> state_dict, storage;
  for (const std::string& key : order) {
    const Key& k = keys.at(key);
    if (k.first->is_bytes) {
      state_dict.emplace_back(py::str(key), dcp_object("BytesStorageMetadata", nullptr));
    } else {
      std::vector<PickleRef> chunks;
      for (const DcpEntry* c : k.chunks) {
        chunks.push_back(dcp_object("ChunkStorageMetadata",
                                    fields({{"offsets", torch_size(c->offsets)}, {"sizes", torch_size(c->sizes)}})));
      }
      state_dict.emplace_back(py::str(key), dcp_object("TensorStorageMetadata",
                                                       fields({{"properties", tensor_properties(k.first->dtype)},
                                                               {"size", torch_size(k.first->size)},
                                                               {"chunks", py::list(std::move(chunks))}})));
    }
    // ... and where each of its items lies.
    for (const DcpEntry* c : k.chunks) {
      storage.emplace_back(
          dcp_object("MetadataIndex", fields({{"fqn", py::str(key)},
                                              {"offset", c->is_bytes ? py::none() : torch_size(c->offsets)},
                                              {"index", py::none()}})),
          py::instance("torch.distributed.checkpoint.filesystem._StorageInfo",
                       fields({{"relative_path", py::str(c->item.file)},
                               {"offset", py::integer(static_cast<std::int64_t>(c->item.offset))},
                               {"length", py::integer(static_cast<std::int64_t>(c->item.length))}})));
    }
  }
  const PickleRef metadata = dcp_object("Metadata", fields({{"state_dict_metadata", py::dict(std::move(state_dict))},
                                                            {"planner_data", py::none()},
                                                            {"storage_data", py::dict(std::move(storage))},
                                                            {"storage_meta", py::none()},
                                                            {"version", py::str("1.0.0")}}));
  const std::string bytes = write_pickle(*metadata);
  AtomicFile file((fs::path(folder) / ".metadata").string());
  file.write(bytes.data(), bytes.size());
  file.commit();
}

}  // namespace megatron::checkpoint
