// A torch.distributed.checkpoint (DCP) folder, as Megatron-Core's torch_dist format writes it:
// `.metadata` (a pickled Metadata: each tensor's global shape, dtype and chunks; where each chunk
// and bytes item lies) and the `__<rank>_<n>.distcp` files holding them, each item a torch.save
// archive at its byte range (or, for bytes items of older writers, the raw bytes). Read without
// Python: the pickles through read_pickle, the archives through TorchSaveArchive; a read touches
// only the chunks its block overlaps, and of each only the span from the overlap's first element
// to its last (TorchSaveArchive::block).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace megatron::checkpoint {

struct DcpItem {
  std::string file;  // relative to the folder
  std::uint64_t offset = 0, length = 0;
};

struct DcpChunk {
  std::vector<std::int64_t> offsets, sizes;  // where it lies in the global tensor
  DcpItem item;
};

struct DcpTensor {
  at::ScalarType dtype = at::kFloat;
  std::vector<std::int64_t> size;  // global shape
  std::vector<DcpChunk> chunks;
};

class DcpCheckpoint {
 public:
  // Reads `<folder>/.metadata`; throws megatron::Error naming the file for anything it cannot
  // understand (an unknown class where a DCP one belongs, a chunk without its storage, a chunk
  // outside its tensor, an item past the end of its file).
  explicit DcpCheckpoint(std::string folder);

  const std::map<std::string, DcpTensor>& tensors() const { return tensors_; }
  const std::map<std::string, DcpItem>& bytes_items() const { return bytes_; }

  // The block [offsets, offsets + sizes) of tensor `name`, from the chunks that overlap it; every
  // element must be covered. Throws naming the tensor and the files.
  at::Tensor read(const std::string& name, const std::vector<std::int64_t>& offsets,
                  const std::vector<std::int64_t>& sizes) const;
  at::Tensor read(const std::string& name) const;  // the whole tensor
  // A bytes item's bytes (an io.BytesIO's value, however the writer stored it).
  std::string read_bytes(const std::string& name) const;

 private:
  std::string folder_;
  std::map<std::string, DcpTensor> tensors_;
  std::map<std::string, DcpItem> bytes_;
};

// Writing a DCP folder as torch.distributed.checkpoint's FileSystemWriter does (TORCH_SAVE items):
// each writer puts its items into a file of its own (DcpFileWriter), then one process writes the
// `.metadata` naming every item of every file (write_dcp_metadata).

// One item a writer wrote: a chunk of a global tensor, or a bytes item.
struct DcpEntry {
  std::string key;
  bool is_bytes = false;
  at::ScalarType dtype = at::kFloat;               // a chunk's
  std::vector<std::int64_t> size, offsets, sizes;  // the global shape; where the chunk lies in it
  DcpItem item;
  // For gathering the entries of every rank: JSON and back (from_json throws on a malformed one).
  nlohmann::json to_json() const;
  static DcpEntry from_json(const nlohmann::json& j);
};

class DcpFileWriter {
 public:
  // Creates <folder>/<file> under a temporary name (AtomicFile, streaming: O_DIRECT).
  DcpFileWriter(const std::string& folder, std::string file);
  ~DcpFileWriter();
  // A chunk: `chunk` is the block at `offsets` of the global tensor `key` of shape `size` (a
  // torch.save archive of the tensor).
  void add_tensor(const std::string& key, std::vector<std::int64_t> size, std::vector<std::int64_t> offsets,
                  const at::Tensor& chunk);
  // A bytes item: `bytes` as they are (an io.BytesIO's value).
  void add_bytes(const std::string& key, const std::string& bytes);
  // fsyncs the file and renames it into place; the entries it holds.
  std::vector<DcpEntry> commit();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// <folder>/.metadata for `entries` (every file's), written atomically. Throws naming a key whose
// chunks disagree on its dtype or global shape, or that is both a tensor and a bytes item.
void write_dcp_metadata(const std::string& folder, const std::vector<DcpEntry>& entries);

}  // namespace megatron::checkpoint
