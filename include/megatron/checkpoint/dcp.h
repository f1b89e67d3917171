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

}  // namespace megatron::checkpoint
