// DCP folders (see dcp.h): torch.distributed.checkpoint.metadata's classes read by name from the
// pickled `.metadata`, chunks assembled into the block a reader asks for.
#include "megatron/checkpoint/dcp.h"

#include <filesystem>
#include <fstream>

#include "megatron/checkpoint/pickle.h"
#include "megatron/checkpoint/torch_save.h"
#include "megatron/core/check.h"
#include "megatron/core/file_io.h"
#include "megatron/core/strings.h"

namespace megatron::checkpoint {
namespace {

namespace fs = std::filesystem;
using Kind = PickleValue::Kind;

constexpr std::string_view kModule = "torch.distributed.checkpoint.";

// Reads the .metadata pickle's values, each problem naming the file.
class MetadataReader {
 public:
  explicit MetadataReader(std::string where) : where_(std::move(where)) {}

  // An object of the DCP class `name` (under kModule's modules), or fail.
  const PickleValue& object(const PickleValue& v, std::string_view name, std::string_view what) const {
    const std::string cls = v.class_name();
    MEGATRON_CHECK(v.kind == Kind::kObject && cls.starts_with(kModule) && cls.ends_with(str_cat(".", name)), where_, ": ",
                   what, " is a ", v.kind_name(), ", not a ", name);
    return v;
  }
  const PickleValue& field(const PickleValue& obj, std::string_view key) const {
    const PickleValue* v = obj.find(key);
    MEGATRON_CHECK(v != nullptr, where_, ": a ", obj.class_name(), " without its '", key, "'");
    return *v;
  }
  std::string text(const PickleValue& v, std::string_view what) const {
    MEGATRON_CHECK(v.kind == Kind::kString, where_, ": ", what, " is a ", v.kind_name(), ", not a str");
    return v.text;
  }
  std::int64_t integer(const PickleValue& v, std::string_view what) const {
    MEGATRON_CHECK(v.kind == Kind::kInt && v.integer >= 0, where_, ": ", what, " is ", v.repr(2), ", not a whole number");
    return v.integer;
  }
  // torch.Size((a, b, ...)), or a plain tuple.
  std::vector<std::int64_t> shape(const PickleValue& v, std::string_view what) const {
    const PickleValue* tuple = &v;
    if (v.class_name() == "torch.Size" && v.args && v.args->items.size() == 1) tuple = v.args->items[0].get();
    MEGATRON_CHECK(tuple->kind == Kind::kTuple || tuple->kind == Kind::kList, where_, ": ", what, " is a ", v.kind_name(),
                   ", not a torch.Size");
    std::vector<std::int64_t> out;
    for (const auto& item : tuple->items) out.push_back(integer(*item, what));
    return out;
  }
  at::ScalarType dtype(const PickleValue& properties) const {
    // TensorProperties' state: (dtype, layout, requires_grad, memory_format, pin_memory), or a dict.
    const PickleValue* state = properties.state.get();
    const PickleValue* dtype = state && state->kind == Kind::kTuple && !state->items.empty() ? state->items[0].get()
                                                                                            : properties.find("dtype");
    MEGATRON_CHECK(dtype && dtype->kind == Kind::kGlobal, where_, ": a tensor's properties name no dtype");
    const auto type = dtype_of_global(dtype->text);
    MEGATRON_CHECK(type.has_value(), where_, ": dtype ", dtype->text, " is not read");
    return *type;
  }

 private:
  std::string where_;
};

}  // namespace

DcpCheckpoint::DcpCheckpoint(std::string folder) : folder_(std::move(folder)) {
  const std::string path = (fs::path(folder_) / ".metadata").string();
  MEGATRON_CHECK(fs::exists(path), folder_, " has no .metadata: not a torch_dist (DCP) checkpoint");
  const PickleRef root = read_pickle(read_text_file(path, "the DCP metadata"), path);
  const MetadataReader r(path);
  r.object(*root, "Metadata", "the pickled object");
  const PickleValue& metadata = r.field(*root, "state_dict_metadata");
  MEGATRON_CHECK(metadata.kind == Kind::kDict, path, ": state_dict_metadata is not a dict");
  for (const auto& [key, value] : metadata.entries) {
    const std::string name = r.text(*key, "a state_dict_metadata key");
    if (value->class_name().ends_with(".BytesStorageMetadata")) {
      bytes_[name] = {};
      continue;
    }
    r.object(*value, "TensorStorageMetadata", name);
    DcpTensor t;
    t.dtype = r.dtype(r.object(r.field(*value, "properties"), "TensorProperties", name + "'s properties"));
    t.size = r.shape(r.field(*value, "size"), name + "'s size");
    const PickleValue& chunks = r.field(*value, "chunks");
    MEGATRON_CHECK(chunks.kind == Kind::kList, path, ": ", name, "'s chunks are not a list");
    for (const auto& c : chunks.items) {
      r.object(*c, "ChunkStorageMetadata", name + "'s chunk");
      DcpChunk chunk{r.shape(r.field(*c, "offsets"), name + "'s chunk offsets"), r.shape(r.field(*c, "sizes"), name + "'s chunk sizes"), {}};
      MEGATRON_CHECK(chunk.offsets.size() == t.size.size() && chunk.sizes.size() == t.size.size(), path, ": a chunk of ", name,
                     " has another rank than the tensor");
      for (std::size_t d = 0; d < t.size.size(); ++d) {
        MEGATRON_CHECK(chunk.offsets[d] + chunk.sizes[d] <= t.size[d], path, ": a chunk of ", name, " lies outside it");
      }
      t.chunks.push_back(std::move(chunk));
    }
    tensors_[name] = std::move(t);
  }
  // Where each chunk (MetadataIndex: fqn and the chunk's offsets) and bytes item lies.
  const PickleValue& storage = r.field(*root, "storage_data");
  MEGATRON_CHECK(storage.kind == Kind::kDict, path, ": storage_data is not a dict");
  for (const auto& [index, info] : storage.entries) {
    r.object(*index, "MetadataIndex", "a storage_data key");
    r.object(*info, "_StorageInfo", "a storage_data value");
    const std::string name = r.text(r.field(*index, "fqn"), "a MetadataIndex's fqn");
    DcpItem item{r.text(r.field(*info, "relative_path"), "a storage's relative_path"),
                 static_cast<std::uint64_t>(r.integer(r.field(*info, "offset"), "a storage's offset")),
                 static_cast<std::uint64_t>(r.integer(r.field(*info, "length"), "a storage's length"))};
    MEGATRON_CHECK(item.file.find('/') == std::string::npos && item.file.find("..") == std::string::npos, path,
                   ": a storage file outside the folder: ", item.file);
    const auto file = fs::path(folder_) / item.file;
    std::error_code ec;
    const auto file_size = fs::file_size(file, ec);
    MEGATRON_CHECK(!ec, path, ": ", name, " is stored in ", item.file, ", which is missing");
    MEGATRON_CHECK(item.offset <= file_size && item.length <= file_size - item.offset, path, ": ", name, " is stored at bytes [",
                   item.offset, ", ", item.offset + item.length, ") of ", item.file, ", which has ", file_size);
    if (auto b = bytes_.find(name); b != bytes_.end()) {
      b->second = item;
      continue;
    }
    const auto t = tensors_.find(name);
    MEGATRON_CHECK(t != tensors_.end(), path, ": storage for ", name, ", which state_dict_metadata does not list");
    const PickleValue* offset = index->find("offset");
    const std::vector<std::int64_t> at =
        offset && offset->kind != Kind::kNone ? r.shape(*offset, name + "'s storage offset") : std::vector<std::int64_t>{};
    auto chunk = std::find_if(t->second.chunks.begin(), t->second.chunks.end(), [&](const DcpChunk& c) { return c.offsets == at; });
    MEGATRON_CHECK(chunk != t->second.chunks.end(), path, ": storage for a chunk of ", name, " that it does not list");
    chunk->item = item;
  }
  for (const auto& [name, t] : tensors_) {
    for (const auto& c : t.chunks) MEGATRON_CHECK(!c.item.file.empty(), path, ": a chunk of ", name, " has no storage");
  }
  for (const auto& [name, item] : bytes_) MEGATRON_CHECK(!item.file.empty(), path, ": bytes item ", name, " has no storage");
}

at::Tensor DcpCheckpoint::read(const std::string& name) const {
  const auto it = tensors_.find(name);
  MEGATRON_CHECK(it != tensors_.end(), folder_, ": no tensor ", name);
  return read(name, std::vector<std::int64_t>(it->second.size.size(), 0), it->second.size);
}

at::Tensor DcpCheckpoint::read(const std::string& name, const std::vector<std::int64_t>& offsets,
                               const std::vector<std::int64_t>& sizes) const {
  const auto it = tensors_.find(name);
  MEGATRON_CHECK(it != tensors_.end(), folder_, ": no tensor ", name);
  const DcpTensor& t = it->second;
  MEGATRON_CHECK(offsets.size() == t.size.size() && sizes.size() == t.size.size(), folder_, ": ", name, " has ", t.size.size(),
                 " dimensions");
  at::Tensor out = at::empty(sizes, at::TensorOptions().dtype(t.dtype));
  std::int64_t covered = 0;
  for (const DcpChunk& c : t.chunks) {
    // The overlap of the chunk with the block, per dimension.
    std::vector<std::int64_t> lo(sizes.size()), hi(sizes.size());
    bool overlaps = true;
    for (std::size_t d = 0; d < sizes.size(); ++d) {
      lo[d] = std::max(offsets[d], c.offsets[d]);
      hi[d] = std::min(offsets[d] + sizes[d], c.offsets[d] + c.sizes[d]);
      overlaps = overlaps && lo[d] < hi[d];
    }
    if (!overlaps && !sizes.empty()) continue;
    const std::string file = (fs::path(folder_) / c.item.file).string();
    const TorchSaveArchive archive(file, c.item.offset, c.item.length);
    MEGATRON_CHECK(TorchSaveArchive::is_tensor(archive.root()), archive.where(), ": the chunk of ", name, " is a ",
                   archive.root().kind_name(), ", not a tensor");
    const TorchSaveArchive::TensorInfo saved = archive.info(archive.root());
    MEGATRON_CHECK(saved.sizes == c.sizes && saved.dtype == t.dtype, archive.where(), ": the chunk of ", name, " is ",
                   at::IntArrayRef(saved.sizes), " ", saved.dtype, ", not the ", at::IntArrayRef(c.sizes), " ", t.dtype,
                   " .metadata says");
    // Only the overlap's part of the chunk is read.
    std::vector<std::int64_t> in_chunk(sizes.size()), extent(sizes.size());
    at::Tensor dst = out;
    std::int64_t n = 1;
    for (std::size_t d = 0; d < sizes.size(); ++d) {
      in_chunk[d] = lo[d] - c.offsets[d];
      extent[d] = hi[d] - lo[d];
      dst = dst.narrow(static_cast<std::int64_t>(d), lo[d] - offsets[d], extent[d]);
      n *= extent[d];
    }
    archive.block_into(archive.root(), in_chunk, extent, dst);
    covered += n;
  }
  MEGATRON_CHECK(covered == out.numel(), folder_, ": the chunks of ", name, " cover ", covered, " of the ", out.numel(),
                 " elements asked for");
  return out;
}

std::string DcpCheckpoint::read_bytes(const std::string& name) const {
  const auto it = bytes_.find(name);
  MEGATRON_CHECK(it != bytes_.end(), folder_, ": no bytes item ", name);
  const std::string file = (fs::path(folder_) / it->second.file).string();
  std::ifstream in(file, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(it->second.offset));
  std::string bytes(it->second.length, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  MEGATRON_CHECK(in.good(), file, ": cannot read bytes item ", name);
  if (!bytes.starts_with("PK\x03\x04")) return bytes;  // the raw bytes
  // torch's own writer saves the io.BytesIO with torch.save: its value is the state's first item.
  // Megatron-Core's writes the value raw, and its values are torch.save archives themselves.
  const TorchSaveArchive archive(file, it->second.offset, it->second.length);
  const PickleValue& root = archive.root();
  if (root.class_name() != "_io.BytesIO") return bytes;
  MEGATRON_CHECK(root.state && root.state->kind == Kind::kTuple && !root.state->items.empty() &&
                     root.state->items[0]->kind == Kind::kBytes,
                 archive.where(), ": bytes item ", name, " is an io.BytesIO without its value");
  return root.state->items[0]->text;
}

}  // namespace megatron::checkpoint
