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
// (zlib polynomial) and size, which the caller records to detect corruption later.
struct FileDigest {
  std::uint64_t size = 0;
  std::uint32_t crc32 = 0;
};
FileDigest write_safetensors(const std::string& path, const NamedTensors& tensors,
                             const std::map<std::string, std::string>& metadata = {});

// Which tensors to read: given a tensor's name and element count, true to read it.
using TensorFilter = std::function<bool(const std::string& name, std::int64_t numel)>;

// Reads every tensor, or those `keep` accepts (copied out of the mapping; the others are never
// touched). Throws megatron::Error naming the file when it is truncated, its header is not valid
// JSON or an offset / shape / dtype does not add up (checked for every entry, read or not).
SafetensorsFile read_safetensors(const std::string& path, const TensorFilter& keep = {});

// CRC-32 and size of a whole file (for verification on load).
FileDigest digest_file(const std::string& path);

}  // namespace megatron::checkpoint
