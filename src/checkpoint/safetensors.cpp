// safetensors reader and writer (see safetensors.h).
#include "megatron/checkpoint/safetensors.h"

#include <zlib.h>

#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "megatron/core/check.h"
#include "megatron/core/file_io.h"

namespace megatron::checkpoint {
namespace {

struct DTypeName {
  at::ScalarType type;
  const char* name;
};
constexpr DTypeName kDTypes[] = {
    {at::kFloat, "F32"}, {at::kDouble, "F64"}, {at::kHalf, "F16"}, {at::kBFloat16, "BF16"},
    {at::kLong, "I64"},  {at::kInt, "I32"},    {at::kByte, "U8"},   {at::kBool, "BOOL"},
};

const char* dtype_name(at::ScalarType t) {
  for (const auto& d : kDTypes) {
    if (d.type == t) return d.name;
  }
  MEGATRON_FAIL("safetensors: unsupported tensor type ", at::toString(t));
}

at::ScalarType dtype_from(const std::string& name, const std::string& path) {
  for (const auto& d : kDTypes) {
    if (name == d.name) return d.type;
  }
  MEGATRON_FAIL(path, ": unsupported safetensors dtype ", name);
}

}  // namespace

FileDigest write_safetensors(const std::string& path, const NamedTensors& tensors,
                             const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  std::vector<at::Tensor> contiguous;
  for (const auto& [name, t] : tensors) {
    MEGATRON_CHECK(t.device().is_cpu(), "safetensors: tensor ", name, " is not on the CPU");
    contiguous.push_back(t.detach().contiguous());
    const std::uint64_t bytes = contiguous.back().nbytes();
    header[name] = {{"dtype", dtype_name(t.scalar_type())}, {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // align the data to 8 bytes
  const std::uint64_t header_size = text.size();

  AtomicFile file(path);
  std::uint32_t crc = static_cast<std::uint32_t>(crc32(0L, Z_NULL, 0));
  auto put = [&](const void* data, std::size_t n) {
    file.write(data, n);
    const auto* p = static_cast<const Bytef*>(data);
    while (n > 0) {  // zlib's crc32 takes a uInt length
      const uInt chunk = static_cast<uInt>(std::min<std::size_t>(n, 1u << 30));
      crc = static_cast<std::uint32_t>(crc32(crc, p, chunk));
      p += chunk;
      n -= chunk;
    }
  };
  put(&header_size, 8);
  put(text.data(), text.size());
  for (const auto& t : contiguous) put(t.data_ptr(), t.nbytes());
  const std::uint64_t size = file.size();
  file.commit();
  return {size, crc};
}

SafetensorsFile read_safetensors(const std::string& path, const TensorFilter& keep) {
  const MappedFile file(path);
  MEGATRON_CHECK(file.size() >= 8, path, ": truncated (", file.size(), " bytes; not a safetensors file)");
  std::uint64_t header_size = 0;
  std::memcpy(&header_size, file.data(), 8);
  MEGATRON_CHECK(header_size <= file.size() - 8, path, ": truncated or not a safetensors file (header of ",
                 header_size, " bytes in a ", file.size(), "-byte file)");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(reinterpret_cast<const char*>(file.data()) + 8,
                                   reinterpret_cast<const char*>(file.data()) + 8 + header_size);
  } catch (const nlohmann::json::exception& e) {
    MEGATRON_FAIL(path, ": the safetensors header is not valid JSON (", e.what(), ")");
  }
  MEGATRON_CHECK(header.is_object(), path, ": the safetensors header is not a JSON object");
  const std::uint64_t data_start = 8 + header_size;
  const std::uint64_t data_size = file.size() - data_start;
  SafetensorsFile out;
  std::vector<std::pair<std::uint64_t, std::size_t>> order;  // by offset, to keep file order
  std::vector<std::pair<std::string, at::Tensor>> unordered;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      for (const auto& [k, v] : entry.items()) out.metadata[k] = v.get<std::string>();
      continue;
    }
    try {
      const auto type = dtype_from(entry.at("dtype").get<std::string>(), path);
      const auto shape = entry.at("shape").get<std::vector<std::int64_t>>();
      const auto offsets = entry.at("data_offsets").get<std::vector<std::uint64_t>>();
      MEGATRON_CHECK(offsets.size() == 2 && offsets[0] <= offsets[1] && offsets[1] <= data_size, path, ": tensor ",
                     name, " has byte range [", offsets.at(0), ", ", offsets.at(1), ") outside the ", data_size,
                     " data bytes (truncated file?)");
      std::int64_t numel = 1;
      for (const std::int64_t d : shape) {
        MEGATRON_CHECK(d >= 0 && (d == 0 || numel <= std::numeric_limits<std::int64_t>::max() / d), path,
                       ": tensor ", name, " has an impossible shape");
        numel *= d;
      }
      const std::uint64_t nbytes = static_cast<std::uint64_t>(numel) * c10::elementSize(type);
      MEGATRON_CHECK(nbytes == offsets[1] - offsets[0], path, ": tensor ", name, " has ", offsets[1] - offsets[0],
                     " bytes, its shape and dtype need ", nbytes);
      if (keep && !keep(name, numel)) continue;
      at::Tensor t = at::empty(shape, type);
      std::memcpy(t.data_ptr(), file.data() + data_start + offsets[0], t.nbytes());
      order.emplace_back(offsets[0], unordered.size());
      unordered.emplace_back(name, std::move(t));
    } catch (const nlohmann::json::exception& e) {
      MEGATRON_FAIL(path, ": malformed entry for tensor ", name, " (", e.what(), ")");
    }
  }
  std::sort(order.begin(), order.end());
  for (const auto& [offset, index] : order) out.tensors.push_back(std::move(unordered[index]));
  return out;
}

FileDigest digest_file(const std::string& path) {
  const MappedFile file(path);
  std::uint32_t crc = static_cast<std::uint32_t>(crc32(0L, Z_NULL, 0));
  const std::uint8_t* p = file.data();
  std::uint64_t n = file.size();
  while (n > 0) {
    const uInt chunk = static_cast<uInt>(std::min<std::uint64_t>(n, 1u << 30));
    crc = static_cast<std::uint32_t>(crc32(crc, p, chunk));
    p += chunk;
    n -= chunk;
  }
  return {file.size(), crc};
}

}  // namespace megatron::checkpoint
