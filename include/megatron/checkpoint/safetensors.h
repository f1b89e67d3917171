// Tensors to and from the safetensors format (8-byte header length, JSON header with dtype,
// shape and byte offsets per tensor, then the raw little-endian data): simple, mmap-friendly and
// readable by the wider ecosystem, so our checkpoints export without conversion. Writes go
// through AtomicFile; reads validate every offset and size and name the file on any problem.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace megatron::checkpoint {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

struct SafetensorsFile {
  NamedTensors tensors;                          // in file order
  std::map<std::string, std::string> metadata;   // "__metadata__"
};

// Writes `tensors` (any of F32/F64/F16/BF16/I64/I32/U8/BOOL, CPU) and returns the file's CRC-32
// (zlib polynomial) and size, which the caller records to detect corruption later. The bytes go
// through AtomicFile's streaming mode (O_DIRECT, double-buffered): at the disk's speed.
struct FileDigest {
  std::uint64_t size = 0;
  std::uint32_t crc32 = 0;
};
FileDigest write_safetensors(const std::string& path, const NamedTensors& tensors,
                             const std::map<std::string, std::string>& metadata = {});

// Which tensors to read: given a tensor's name and element count, true to read it.
using TensorFilter = std::function<bool(const std::string& name, std::int64_t numel)>;

// Reads every tensor, or those `keep` accepts, in file order. The file is read whole by one
// populated copy-on-write mapping and the tensors are views of it (writable; the mapping lives as
// long as any of them), so no fresh memory is filled; when no tensor is wanted only the header is
// read. Throws megatron::Error naming the file for whatever the safetensors library refuses: a
// truncated file, a header that is not a JSON object, an offset / shape / dtype that does not add
// up (checked for every entry, read or not), tensors sharing bytes or leaving bytes to none (gaps,
// trailing bytes), a tensor named twice, an `__metadata__` that is not a map of strings. With
// `digest`: when the file was read, its size and CRC-32 (as digest_file gives, from the same
// mapping); otherwise `digest` is left at zero.
SafetensorsFile read_safetensors(const std::string& path, const TensorFilter& keep = {},
                                 FileDigest* digest = nullptr);

// CRC-32 (zlib's polynomial and chaining: crc32_update(crc32_update(0, a), b) is the CRC of a + b),
// with ISA-L where the build has it (about 27 GB/s here, zlib's about 4).
std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t bytes);

// CRC-32 and size of a whole file (for verification on load).
FileDigest digest_file(const std::string& path);

}  // namespace megatron::checkpoint
