// safetensors reader and writer (see safetensors.h).
#include "megatron/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#if MEGATRON_HAVE_ISAL
#include <isa-l/crc.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>
#include <tuple>
#include <nlohmann/json.hpp>
#include <system_error>

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

// The safetensors library's limit on the header's size.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

// One tensor's entry in the header.
struct Entry {
  std::uint64_t begin;
  std::uint64_t end;
  std::string name;
  std::vector<std::int64_t> shape;
  at::ScalarType type;
  bool keep;
};

// A file whose header is read with pread, before deciding whether to map the rest.
class HeaderReader {
 public:
  explicit HeaderReader(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) fail("cannot open");
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      const int saved_errno = errno;
      ::close(fd_);  // no destructor runs for a constructor that throws
      errno = saved_errno;
      fail("cannot stat");
    }
    size_ = static_cast<std::uint64_t>(st.st_size);
  }
  ~HeaderReader() { ::close(fd_); }
  HeaderReader(const HeaderReader&) = delete;
  HeaderReader& operator=(const HeaderReader&) = delete;
  std::uint64_t size() const { return size_; }
  // Reads [offset, offset + bytes) into `out` (the caller checked the range against size()).
  void read(void* out, std::uint64_t bytes, std::uint64_t offset) const {
    auto* p = static_cast<char*>(out);
    while (bytes > 0) {
      const ssize_t n = ::pread(fd_, p, static_cast<std::size_t>(std::min<std::uint64_t>(bytes, 1u << 30)),
                                static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail("cannot read");
      MEGATRON_CHECK(n > 0, path_, ": the file shrank while being read");
      p += n;
      bytes -= static_cast<std::uint64_t>(n);
      offset += static_cast<std::uint64_t>(n);
    }
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    throw Error(str_cat(path_, ": ", what, " (", std::error_code(errno, std::generic_category()).message(), ")"));
  }
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

// The header as JSON, refusing what the safetensors library refuses or cannot mean one thing: not
// an object, or a tensor named twice (a JSON parser would keep one of the two silently).
nlohmann::json parse_header(const std::string& text, const std::string& path) {
  std::set<std::string> names;
  std::string repeated;
  const auto note_names = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (depth == 1 && event == nlohmann::json::parse_event_t::key && !names.insert(parsed.get<std::string>()).second &&
        repeated.empty()) {
      repeated = parsed.get<std::string>();
    }
    return true;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text, note_names);
  } catch (const nlohmann::json::exception& e) {
    MEGATRON_FAIL(path, ": the safetensors header is not valid JSON (", e.what(), ")");
  }
  MEGATRON_CHECK(header.is_object(), path, ": the safetensors header is not a JSON object");
  MEGATRON_CHECK(repeated.empty(), path, ": the safetensors header names \"", repeated, "\" twice");
  return header;
}

// "__metadata__": a map of strings (or null, which the safetensors library reads as none).
std::map<std::string, std::string> read_metadata(const nlohmann::json& entry, const std::string& path) {
  std::map<std::string, std::string> out;
  if (entry.is_null()) return out;
  MEGATRON_CHECK(entry.is_object(), path, ": the safetensors __metadata__ is a JSON ", entry.type_name(),
                 "; the format needs an object of strings");
  for (const auto& [k, v] : entry.items()) {
    MEGATRON_CHECK(v.is_string(), path, ": the safetensors __metadata__ entry \"", k, "\" is a JSON ", v.type_name(),
                   "; the format needs strings");
    out[k] = v.get<std::string>();
  }
  return out;
}

// The tensors' byte ranges (sorted) must tile the data exactly, as the safetensors library
// requires: no two tensors sharing bytes, no bytes that belong to none, nothing after the last.
void check_coverage(const std::vector<Entry>& sorted, std::uint64_t data_size, const std::string& path) {
  std::uint64_t end = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : sorted) {
    if (e.begin < end) {
      MEGATRON_FAIL(path, ": tensors ", previous->name, " [", previous->begin, ", ", previous->end, ") and ", e.name,
                    " [", e.begin, ", ", e.end, ") share data bytes");
    }
    MEGATRON_CHECK(e.begin == end, path, ": data bytes [", end, ", ", e.begin, ") belong to no tensor");
    end = e.end;
    previous = &e;
  }
  MEGATRON_CHECK(end == data_size, path, ": ", data_size - end, " bytes after the last tensor's data (the tensors ",
                 "cover ", end, " of the ", data_size, " data bytes)");
}

}  // namespace

std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t bytes) {
#if MEGATRON_HAVE_ISAL
  return crc32_gzip_refl(crc, static_cast<const unsigned char*>(data), bytes);
#else
  const auto* p = static_cast<const Bytef*>(data);
  while (bytes > 0) {  // zlib's crc32 takes a uInt length
    const uInt chunk = static_cast<uInt>(std::min<std::size_t>(bytes, 1u << 30));
    crc = static_cast<std::uint32_t>(crc32(crc, p, chunk));
    p += chunk;
    bytes -= chunk;
  }
  return crc;
#endif
}

FileDigest write_safetensors(const std::string& path, const NamedTensors& tensors,
                             const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const std::uint64_t bytes = t.nbytes();
    header[name] = {{"dtype", dtype_name(t.scalar_type())}, {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // align the data to 8 bytes
  const std::uint64_t header_size = text.size();

  AtomicFile file(path, AtomicFile::Mode::kStreaming);
  std::uint32_t crc = 0;
  auto put = [&](const void* data, std::size_t n) {
    crc = crc32_update(crc, data, n);
    file.write(data, n);
  };
  put(&header_size, 8);
  put(text.data(), text.size());
  // One tensor at a time: a device tensor (a synchronous save on GPU ranks) or a strided one is
  // copied to contiguous host memory just before its bytes are written, so the host holds one
  // tensor's copy, not the whole state's.
  for (const auto& [name, t] : tensors) {
    const at::Tensor host = t.detach().to(at::kCPU).contiguous();
    put(host.data_ptr(), host.nbytes());
  }
  const std::uint64_t size = file.size();
  file.commit();
  return {size, crc};
}

SafetensorsFile read_safetensors(const std::string& path, const TensorFilter& keep, FileDigest* digest) {
  const HeaderReader file(path);
  MEGATRON_CHECK(file.size() >= 8, path, ": truncated (", file.size(), " bytes; not a safetensors file)");
  std::uint64_t header_size = 0;
  file.read(&header_size, 8, 0);
  MEGATRON_CHECK(header_size <= file.size() - 8, path, ": truncated or not a safetensors file (header of ",
                 header_size, " bytes in a ", file.size(), "-byte file)");
  MEGATRON_CHECK(header_size <= kMaxHeaderBytes, path, ": a safetensors header of ", header_size,
                 " bytes (the format allows ", kMaxHeaderBytes, ")");
  std::string header_text(static_cast<std::size_t>(header_size), '\0');
  file.read(header_text.data(), header_size, 8);
  const nlohmann::json header = parse_header(header_text, path);
  const std::uint64_t data_start = 8 + header_size;
  const std::uint64_t data_size = file.size() - data_start;
  SafetensorsFile out;
  std::vector<Entry> entries;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      out.metadata = read_metadata(entry, path);
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
      const std::uint64_t element = c10::elementSize(type);
      MEGATRON_CHECK(static_cast<std::uint64_t>(numel) <= data_size / element, path, ": tensor ", name, " needs ",
                     numel, " elements of ", element, " bytes; the file has ", data_size, " data bytes");
      const std::uint64_t nbytes = static_cast<std::uint64_t>(numel) * element;
      MEGATRON_CHECK(nbytes == offsets[1] - offsets[0], path, ": tensor ", name, " has ", offsets[1] - offsets[0],
                     " bytes, its shape and dtype need ", nbytes);
      entries.push_back(Entry{offsets[0], offsets[1], name, shape, type, !keep || keep(name, numel)});
    } catch (const nlohmann::json::exception& e) {
      MEGATRON_FAIL(path, ": malformed entry for tensor ", name, " (", e.what(), ")");
    }
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
  check_coverage(entries, data_size, path);
  const bool any = std::any_of(entries.begin(), entries.end(), [](const Entry& e) { return e.keep; });
  if (!any && !(digest != nullptr && !keep)) return out;  // nothing wanted: the header was enough
  // The whole file in one populated private mapping (read at the disk's speed, no fresh anonymous
  // memory to fault in); the tensors are views of it and keep it alive.
  const auto mapping = std::make_shared<MappedFile>(path, MappedFile::Mode::kPrivatePopulated);
  MEGATRON_CHECK(mapping->size() == file.size(), path, ": the file changed size while being read");
  if (digest != nullptr) *digest = {mapping->size(), crc32_update(0, mapping->data(), mapping->size())};
  for (Entry& e : entries) {
    if (!e.keep) continue;
    std::uint8_t* data = mapping->mutable_data() + data_start + e.begin;
    at::Tensor t = at::from_blob(
        data, e.shape, [mapping](void*) {}, at::TensorOptions().dtype(e.type));
    // A tensor after one with an odd byte count can start unaligned for its type: copy that one.
    if (reinterpret_cast<std::uintptr_t>(data) % c10::elementSize(e.type) != 0) t = t.clone();
    out.tensors.emplace_back(std::move(e.name), std::move(t));
  }
  return out;
}

FileDigest digest_file(const std::string& path) {
  const MappedFile file(path);
  return {file.size(), crc32_update(0, file.data(), static_cast<std::size_t>(file.size()))};
}

}  // namespace megatron::checkpoint
