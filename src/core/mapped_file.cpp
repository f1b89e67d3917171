// MappedFile (see file_io.h): a whole file memory-mapped, shared or private. POSIX only.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

#include "megatron/core/check.h"
#include "megatron/core/file_io.h"

namespace megatron {

MappedFile::MappedFile(const std::string& path, Mode mode) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_system_error(str_cat("cannot open ", path));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw_system_error(str_cat("cannot stat ", path));
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
  if (size_ > 0) {
    // kPrivatePopulated maps read-only first: populating a writable private mapping would copy
    // every page (breaking copy-on-write up front); made writable after, pages copy when written.
    void* p = mode == Mode::kShared ? ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0)
                                    : ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (p != MAP_FAILED && mode == Mode::kPrivatePopulated && ::mprotect(p, size_, PROT_READ | PROT_WRITE) != 0) {
      ::munmap(p, size_);
      p = MAP_FAILED;
    }
    if (p == MAP_FAILED) {
      ::close(fd);
      throw_system_error(str_cat("cannot mmap ", path));
    }
    data_ = static_cast<const std::uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::uint8_t*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(const_cast<std::uint8_t*>(data_), size_);
    path_ = std::move(other.path_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

}  // namespace megatron
