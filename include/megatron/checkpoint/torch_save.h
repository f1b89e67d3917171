// A torch.save archive (the zip format of PyTorch 1.6 on): its pickled object read by read_pickle
// (so nothing in it runs) and the tensors it holds, from their storages through LibTorch's zip
// reader. A whole file (Megatron's model_optim_rng.pt, common.pt), or one item of a DCP .distcp
// file: the archive at a byte range, read there without the rest of the file.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "megatron/checkpoint/pickle.h"

namespace caffe2::serialize {
class ReadAdapterInterface;
}

namespace megatron::checkpoint {

class TorchSaveArchive {
 public:
  // The archive in `path`, or the `length` bytes from `offset` of it. Throws megatron::Error
  // naming the file (and the range) when it is not a readable torch.save archive.
  explicit TorchSaveArchive(const std::string& path, std::uint64_t offset = 0,
                            std::optional<std::uint64_t> length = std::nullopt);
  // An archive held in memory (a DCP bytes item's value); `where` names it in messages.
  static TorchSaveArchive from_bytes(std::string bytes, const std::string& where);
  ~TorchSaveArchive();
  TorchSaveArchive(TorchSaveArchive&&) noexcept;
  TorchSaveArchive& operator=(TorchSaveArchive&&) noexcept;

  // The saved object (data.pkl); a tensor in it is a torch._utils._rebuild_tensor_v2 placeholder.
  const PickleValue& root() const { return *root_; }
  // "<path>" or "<path> bytes [offset, offset + length)", for messages.
  const std::string& where() const { return where_; }

  // Whether `v` is a tensor as torch.save writes one (_rebuild_tensor_v2, or a Parameter of one).
  static bool is_tensor(const PickleValue& v);
  // That tensor, on the CPU, owning its memory (a view of a shared storage is copied out). Throws
  // naming the archive when `v` is not a tensor, its storage is missing, of another size than it
  // says, or the view reaches past it.
  at::Tensor tensor(const PickleValue& v) const;
  // A tensor's dtype and shape, without reading its data (checked as tensor() checks it).
  struct TensorInfo {
    at::ScalarType dtype = at::kFloat;
    std::vector<std::int64_t> sizes;
  };
  TensorInfo info(const PickleValue& v) const;
  // The block [offsets, offsets + sizes) of that tensor, reading only the bytes of its storage from
  // the block's first element to its last (a part of a saved chunk costs its part of the I/O).
  at::Tensor block(const PickleValue& v, const std::vector<std::int64_t>& offsets,
                   const std::vector<std::int64_t>& sizes) const;
  // The same into `dst` (CPU, that block's shape and dtype; a view of a larger tensor too). A
  // contiguous `dst` whose block is a contiguous span of the storage (a whole tensor, rows of one)
  // is read into directly, without a staging copy.
  void block_into(const PickleValue& v, const std::vector<std::int64_t>& offsets,
                  const std::vector<std::int64_t>& sizes, at::Tensor& dst) const;

 private:
  struct View;
  View view(const PickleValue& v) const;
  TorchSaveArchive(std::shared_ptr<caffe2::serialize::ReadAdapterInterface> input, std::string where);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string where_;
  PickleRef root_;
};

// Writes a torch.save archive, as torch.save does (records data.pkl, .format_version,
// .storage_alignment, byteorder, data/<key> 64-byte aligned, version, .data/serialization_id),
// loadable by torch.load with weights_only: the object `root`, whose tensors are the references
// tensor() made.
class TorchSaveWriter {
 public:
  // A reference to `t` for the object: torch._utils._rebuild_tensor_v2 of a storage of its own
  // holding t's elements (t is copied to contiguous CPU memory when written, if it is not).
  PickleRef tensor(const at::Tensor& t);
  // Gives the archive's bytes to `sink` in order (nothing is held but the pickle); returns their
  // count. `crc32`: whether the zip records carry CRC-32s (torch.load does not check them).
  using Sink = std::function<void(const void*, std::size_t)>;
  std::uint64_t write(const PickleValue& root, const Sink& sink, bool crc32 = true) const;
  std::string bytes(const PickleValue& root) const;

 private:
  std::vector<at::Tensor> tensors_;
};

// A dtype as pickles name it ("torch.float32"), and back (its aliases too: "torch.float").
std::string dtype_global(at::ScalarType dtype);
std::optional<at::ScalarType> dtype_of_global(const std::string& name);
// torch.save's storage class of a dtype ("torch.FloatStorage"); throws for a dtype it has none of.
std::string storage_class(at::ScalarType dtype);

}  // namespace megatron::checkpoint
