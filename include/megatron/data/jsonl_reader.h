// Streaming line reader over plain, gzip (.gz, also multi-member) and zstd (.zst, also
// multi-frame) files. Compression is recognised by the file's magic bytes; an extension that
// promises a format the bytes do not have is an error. Memory is one block plus the longest line.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace megatron::data {

enum class Compression { kNone, kGzip, kZstd };
const char* compression_name(Compression c);

// Decompressed bytes of a file, block by block.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Fills up to `capacity` bytes; returns 0 only at the end of the data. Throws megatron::Error
  // naming the file on I/O errors and corrupt or truncated compressed data.
  virtual std::size_t read(char* buffer, std::size_t capacity) = 0;
  // Bytes taken from the file so far (compressed bytes for compressed files).
  virtual std::uint64_t file_bytes_read() const = 0;
};

std::unique_ptr<ByteSource> open_byte_source(const std::string& path, Compression& compression);

class LineReader {
 public:
  explicit LineReader(const std::string& path);
  ~LineReader();

  // The next line without its terminator: "\n", "\r\n" or a lone "\r", as Python's universal
  // newlines split a file read in text mode; the view stays valid until the next call. A UTF-8
  // byte-order mark at the start of the file is dropped; a file that starts like UTF-16 is an
  // error. False at the end.
  bool next(std::string_view& line);

  std::uint64_t line_number() const { return line_number_; }  // 1-based, of the last line
  bool last_line_had_newline() const { return had_newline_; }
  std::uint64_t file_bytes_read() const { return source_->file_bytes_read(); }
  const std::string& path() const { return path_; }
  Compression compression() const { return compression_; }

 private:
  bool refill();
  void check_not_utf16();

  std::string path_;
  Compression compression_ = Compression::kNone;
  std::unique_ptr<ByteSource> source_;
  std::vector<char> buffer_;
  std::size_t begin_ = 0;  // unread data is buffer_[begin_, end_)
  std::size_t end_ = 0;
  std::size_t scanned_ = 0;  // bytes after begin_ already known to hold no '\n'
  bool eof_ = false;
  bool at_start_ = true;
  bool had_newline_ = false;
  std::uint64_t line_number_ = 0;
};

// Expands --input values: a path that exists is taken as it is, even with *, ? or [ in its name;
// any other value holding one of them is a glob pattern, whose matches are sorted.
// Throws naming the pattern when a glob matches nothing; checks every file is readable.
std::vector<std::string> expand_inputs(const std::vector<std::string>& patterns);

}  // namespace megatron::data
