// Plain / gzip / zstd byte sources and the line reader (see jsonl_reader.h).
#include "megatron/data/jsonl_reader.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "megatron/core/check.h"
#include "megatron/core/file_io.h"

namespace megatron::data {
namespace {

constexpr std::size_t kBlock = 1 << 20;

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

class FileSource : public ByteSource {
 public:
  explicit FileSource(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw_system_error(str_cat("cannot open input ", path));
    ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
  }
  ~FileSource() override { ::close(fd_); }

  std::size_t read(char* buffer, std::size_t capacity) override {
    while (true) {
      const ssize_t n = ::read(fd_, buffer, capacity);
      if (n >= 0) {
        bytes_ += static_cast<std::uint64_t>(n);
        return static_cast<std::size_t>(n);
      }
      if (errno != EINTR) throw_system_error(str_cat("cannot read input ", path_));
    }
  }
  std::uint64_t file_bytes_read() const override { return bytes_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t bytes_ = 0;
};

class GzipSource : public ByteSource {
 public:
  explicit GzipSource(const std::string& path) : path_(path), file_(path), in_(kBlock) {
    std::memset(&stream_, 0, sizeof(stream_));
    // 15 + 32: gzip or zlib header, detected automatically.
    MEGATRON_CHECK(inflateInit2(&stream_, 15 + 32) == Z_OK, "zlib cannot start for ", path);
  }
  ~GzipSource() override { inflateEnd(&stream_); }

  std::size_t read(char* buffer, std::size_t capacity) override {
    stream_.next_out = reinterpret_cast<Bytef*>(buffer);
    stream_.avail_out = static_cast<uInt>(capacity);
    while (stream_.avail_out == capacity) {
      if (stream_.avail_in == 0) {
        const std::size_t n = file_.read(in_.data(), in_.size());
        if (n == 0) {
          MEGATRON_CHECK(!in_member_, path_, ": truncated gzip data (the file ends inside a compressed member)");
          break;
        }
        stream_.next_in = reinterpret_cast<Bytef*>(in_.data());
        stream_.avail_in = static_cast<uInt>(n);
      }
      if (!in_member_ && (padding_ || *stream_.next_in == 0)) {
        skip_padding();
        continue;
      }
      in_member_ = true;
      const int rc = inflate(&stream_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        in_member_ = false;
        inflateReset(&stream_);  // a further gzip member may follow (concatenated .gz files)
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        MEGATRON_FAIL(path_, ": corrupt gzip data (zlib: ", stream_.msg ? stream_.msg : zError(rc), ")");
      }
    }
    return capacity - stream_.avail_out;
  }
  std::uint64_t file_bytes_read() const override { return file_.file_bytes_read(); }

 private:
  // Zero bytes after the last member are padding, which gzip ignores too; nothing may follow.
  void skip_padding() {
    padding_ = true;
    for (; stream_.avail_in > 0; ++stream_.next_in, --stream_.avail_in) {
      MEGATRON_CHECK(*stream_.next_in == 0, path_, ": data after the zero padding that follows the last gzip member");
    }
  }

  std::string path_;
  FileSource file_;
  std::vector<char> in_;
  z_stream stream_;
  bool in_member_ = false;
  bool padding_ = false;
};

class ZstdSource : public ByteSource {
 public:
  explicit ZstdSource(const std::string& path)
      : path_(path), file_(path), in_(ZSTD_DStreamInSize()), ctx_(ZSTD_createDCtx()) {
    MEGATRON_CHECK(ctx_ != nullptr, "zstd cannot start for ", path);
  }
  ~ZstdSource() override { ZSTD_freeDCtx(ctx_); }

  std::size_t read(char* buffer, std::size_t capacity) override {
    ZSTD_outBuffer out{buffer, capacity, 0};
    while (out.pos == 0) {
      if (input_.pos == input_.size) {
        const std::size_t n = file_.read(in_.data(), in_.size());
        if (n == 0) {
          MEGATRON_CHECK(last_hint_ == 0, path_, ": truncated zstd data (the file ends inside a frame)");
          break;
        }
        input_ = {in_.data(), n, 0};
      }
      const std::size_t rc = ZSTD_decompressStream(ctx_, &out, &input_);
      MEGATRON_CHECK(!ZSTD_isError(rc), path_, ": corrupt zstd data (", ZSTD_getErrorName(rc), ")");
      last_hint_ = rc;
    }
    return out.pos;
  }
  std::uint64_t file_bytes_read() const override { return file_.file_bytes_read(); }

 private:
  std::string path_;
  FileSource file_;
  std::vector<char> in_;
  ZSTD_DCtx* ctx_;
  ZSTD_inBuffer input_{nullptr, 0, 0};
  std::size_t last_hint_ = 0;  // 0 once a frame is complete
};

Compression sniff(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_system_error(str_cat("cannot open input ", path));
  unsigned char magic[4] = {0, 0, 0, 0};
  const ssize_t n = ::read(fd, magic, sizeof(magic));
  ::close(fd);
  if (n >= 2 && magic[0] == 0x1F && magic[1] == 0x8B) return Compression::kGzip;
  if (n >= 4 && magic[0] == 0x28 && magic[1] == 0xB5 && magic[2] == 0x2F && magic[3] == 0xFD) {
    return Compression::kZstd;
  }
  return Compression::kNone;
}

}  // namespace

const char* compression_name(Compression c) {
  switch (c) {
    case Compression::kGzip: return "gzip";
    case Compression::kZstd: return "zstd";
    default: return "none";
  }
}

std::unique_ptr<ByteSource> open_byte_source(const std::string& path, Compression& compression) {
  check_readable_file(path, "input");
  compression = sniff(path);
  MEGATRON_CHECK(!ends_with(path, ".gz") || compression == Compression::kGzip, path,
                 ": named .gz but does not start with the gzip magic bytes");
  MEGATRON_CHECK(!(ends_with(path, ".zst") || ends_with(path, ".zstd")) || compression == Compression::kZstd,
                 path, ": named .zst but does not start with the zstd magic bytes");
  switch (compression) {
    case Compression::kGzip: return std::make_unique<GzipSource>(path);
    case Compression::kZstd: return std::make_unique<ZstdSource>(path);
    default: return std::make_unique<FileSource>(path);
  }
}

LineReader::LineReader(const std::string& path)
    : path_(path), source_(open_byte_source(path, compression_)), buffer_(kBlock) {}

LineReader::~LineReader() = default;

bool LineReader::refill() {
  if (eof_) return false;
  if (begin_ > 0) {  // keep the partial line, at the front
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == buffer_.size()) buffer_.resize(buffer_.size() * 2);  // a line longer than the buffer
  const std::size_t n = source_->read(buffer_.data() + end_, buffer_.size() - end_);
  if (n == 0) {
    eof_ = true;
    return false;
  }
  end_ += n;
  return true;
}

void LineReader::check_not_utf16() {
  while (end_ - begin_ < 2 && refill()) {
  }
  if (end_ - begin_ < 2) return;
  const auto b0 = static_cast<unsigned char>(buffer_[begin_]);
  const auto b1 = static_cast<unsigned char>(buffer_[begin_ + 1]);
  const bool bom = (b0 == 0xFF && b1 == 0xFE) || (b0 == 0xFE && b1 == 0xFF);
  const bool nul_between = (b0 == 0) != (b1 == 0) && (b0 | b1) < 0x80;
  MEGATRON_CHECK(!bom && !nul_between, path_, ": looks like UTF-16 (",
                 bom ? "it starts with a UTF-16 byte-order mark" : "NUL bytes between its first characters",
                 "), not UTF-8; convert it first, e.g. iconv -f UTF-16 -t UTF-8 ", path_);
}

bool LineReader::next(std::string_view& line) {
  if (at_start_) check_not_utf16();
  while (true) {
    const char* base = buffer_.data() + begin_;
    const char* end = buffer_.data() + end_;
    // Python's universal newlines: a line ends at "\n", "\r\n" or a lone "\r", nothing else.
    const auto* nl = static_cast<const char*>(std::memchr(base + scanned_, '\n', end - base - scanned_));
    const char* limit = nl != nullptr ? nl : end;
    const auto* cr = static_cast<const char*>(std::memchr(base + scanned_, '\r', limit - base - scanned_));
    if (cr != nullptr && cr + 1 == end && !eof_) {  // a "\r" that a "\n" may follow in the next block
      scanned_ = static_cast<std::size_t>(cr - base);
      refill();  // moves the buffer: look again, with eof_ set when nothing came
      continue;
    }
    const char* eol = cr != nullptr ? cr : nl;
    if (eol != nullptr) {
      const auto len = static_cast<std::size_t>(eol - base);
      const bool crlf = eol == cr && eol + 1 < end && eol[1] == '\n';
      line = std::string_view(base, len);
      begin_ += len + (crlf ? 2 : 1);
      scanned_ = 0;
      had_newline_ = true;
      break;
    }
    scanned_ = end_ - begin_;
    if (!refill()) {
      if (end_ == begin_) return false;
      line = std::string_view(buffer_.data() + begin_, end_ - begin_);  // last line, no newline
      begin_ = end_;
      scanned_ = 0;
      had_newline_ = false;
      break;
    }
  }
  ++line_number_;
  if (at_start_) {
    at_start_ = false;
    if (line.size() >= 3 && line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);
  }
  return true;
}

std::vector<std::string> expand_inputs(const std::vector<std::string>& patterns) {
  std::vector<std::string> files;
  for (const auto& pattern : patterns) {
    // An existing path is a file name even when it holds *, ? or [ (as Python's open() reads it).
    struct stat st {};
    if (pattern.find_first_of("*?[") == std::string::npos || ::lstat(pattern.c_str(), &st) == 0) {
      check_readable_file(pattern, "--input");
      files.push_back(pattern);
      continue;
    }
    glob_t g{};
    const int rc = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &g);
    std::vector<std::string> matches;
    if (rc == 0) {
      for (std::size_t i = 0; i < g.gl_pathc; ++i) matches.emplace_back(g.gl_pathv[i]);
    }
    globfree(&g);
    MEGATRON_CHECK(rc == 0 || rc == GLOB_NOMATCH, "--input ", pattern, ": cannot read the folders the pattern names");
    MEGATRON_CHECK(!matches.empty(), "--input ", pattern, ": the pattern matches no file");
    std::sort(matches.begin(), matches.end());
    for (const auto& m : matches) {
      check_readable_file(m, "--input");
      files.push_back(m);
    }
  }
  return files;
}

}  // namespace megatron::data
