// AtomicFile, MappedFile and path checks (see file_io.h). POSIX only.
#include "megatron/core/file_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <sstream>

#include "megatron/core/check.h"

namespace megatron {
namespace {

constexpr std::size_t kWriteBuffer = 4 << 20;
// kStreaming: two buffers of this size; the alignment O_DIRECT needs of memory, offsets and
// lengths on every Linux file system with sectors up to 4 KiB.
constexpr std::size_t kStreamBuffer = 16 << 20;
constexpr std::size_t kDirectAlign = 4096;

// pwrite of all `bytes` at `offset`. With O_DIRECT on: a file system that refuses it for this
// file (EINVAL) gets the same bytes through the page cache instead.
void pwrite_all(int fd, const char* data, std::size_t bytes, std::uint64_t offset, const std::string& path) {
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd, data, bytes, static_cast<off_t>(offset));
    if (n == 0) throw_error(str_cat("cannot write ", path, ": the file system took no bytes"));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int flags = ::fcntl(fd, F_GETFL);
      if (errno == EINVAL && flags >= 0 && (flags & O_DIRECT) != 0 && ::fcntl(fd, F_SETFL, flags & ~O_DIRECT) == 0) {
        continue;
      }
      throw_system_error(str_cat("cannot write ", path));
    }
    data += n;
    bytes -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
}

// Paths the signal handler must remove. Fixed storage: the handler may only touch
// async-signal-safe state (atomics and plain char arrays). A slot's state goes kFree -> kClaimed
// (path being copied, ignored by the handler) -> kFile or kFolder -> kFree.
constexpr int kCleanupSlots = 64;
constexpr std::size_t kPathMax = 4096;
constexpr int kFree = 0;
constexpr int kClaimed = 1;
constexpr int kFile = 2;
constexpr int kFolder = 3;
std::array<std::atomic<int>, kCleanupSlots> g_slot_state{};
std::array<std::array<char, kPathMax>, kCleanupSlots> g_slot_path{};
std::atomic<unsigned> g_temp_counter{0};
// Set by the handler before it looks at a slot: a commit that released its slot checks it to
// know whether a removal of what it is about to publish may have begun.
std::atomic<bool> g_cleanup_started{false};

// Linux getdents64 records: u64 inode, s64 offset, u16 record length, u8 type, then the name.
constexpr std::size_t kDirentReclenOffset = 16;
constexpr std::size_t kDirentNameOffset = 19;
constexpr int kMaxFolderDepth = 8;

// Removes `name` (relative to folder `dir_fd`) and, when it is a folder, everything in it, with
// async-signal-safe calls only: unlinkat, openat, the getdents64 system call, lseek, close (no
// opendir/readdir, which allocate). Returns true when the name is gone.
bool remove_tree_at(int dir_fd, const char* name, int depth) {
  if (::unlinkat(dir_fd, name, 0) == 0 || errno == ENOENT) return true;
  if (depth == 0) return false;
  const int fd = ::openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  alignas(8) char buf[2048];
  // Removing entries while listing may hide others from the listing: list again until a pass
  // removes nothing (a few passes at most).
  for (int pass = 0; pass < 4; ++pass) {
    bool removed_any = false;
    ::lseek(fd, 0, SEEK_SET);
    for (;;) {
      const long n = ::syscall(SYS_getdents64, fd, buf, sizeof(buf));
      if (n <= 0) break;
      for (long off = 0; off < n;) {
        unsigned short reclen = 0;
        std::memcpy(&reclen, buf + off + kDirentReclenOffset, sizeof(reclen));
        const char* entry = buf + off + kDirentNameOffset;
        off += reclen;
        if (std::strcmp(entry, ".") == 0 || std::strcmp(entry, "..") == 0) continue;
        if (remove_tree_at(fd, entry, depth - 1)) removed_any = true;
      }
    }
    if (!removed_any) break;
  }
  ::close(fd);
  return ::unlinkat(dir_fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT;
}

extern "C" void cleanup_and_reraise(int signo) {
  const int saved_errno = errno;
  g_cleanup_started.store(true);
  for (int kind : {kFile, kFolder}) {  // files first: an AtomicFile may sit in a TemporaryFolder
    for (int i = 0; i < kCleanupSlots; ++i) {
      if (g_slot_state[i].load() != kind) continue;
      if (kind == kFile) {
        ::unlink(g_slot_path[i].data());
      } else {
        remove_tree_at(AT_FDCWD, g_slot_path[i].data(), kMaxFolderDepth);
      }
    }
  }
  errno = saved_errno;
  std::signal(signo, SIG_DFL);
  std::raise(signo);
}

}  // namespace

void fsync_folder(const std::string& folder) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

void fsync_parent_folder(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  fsync_folder(parent.empty() ? std::string(".") : parent.string());
}

namespace detail {

bool signal_cleanup_started() { return g_cleanup_started.load(); }

int register_signal_cleanup(const std::string& path, bool folder) {
  if (path.size() >= kPathMax) return -1;
  for (int i = 0; i < kCleanupSlots; ++i) {
    int expected = kFree;
    if (g_slot_state[i].compare_exchange_strong(expected, kClaimed)) {
      std::memcpy(g_slot_path[i].data(), path.c_str(), path.size() + 1);
      g_slot_state[i].store(folder ? kFolder : kFile);
      return i;
    }
  }
  return -1;
}

void release_signal_cleanup(int slot) {
  if (slot >= 0) g_slot_state[slot].store(kFree);
}

}  // namespace detail

void AtomicFile::AlignedFree::operator()(char* p) const { std::free(p); }

AtomicFile::AtomicFile(std::string final_path, Mode mode)
    : final_path_(std::move(final_path)), streaming_(mode == Mode::kStreaming) {
  temp_path_ = str_cat(final_path_, ".tmp.", ::getpid(), ".", g_temp_counter.fetch_add(1));
  cleanup_slot_ = detail::register_signal_cleanup(temp_path_, false);
  const int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC;
  fd_ = streaming_ ? ::open(temp_path_.c_str(), flags | O_DIRECT, 0644) : -1;
  if (fd_ < 0 && streaming_ && errno == EINVAL) ::unlink(temp_path_.c_str());  // no O_DIRECT here
  if (fd_ < 0) fd_ = ::open(temp_path_.c_str(), flags, 0644);
  if (fd_ < 0) {
    detail::release_signal_cleanup(cleanup_slot_);
    throw_system_error(str_cat("cannot create ", temp_path_, " (temporary for ", final_path_, ")"));
  }
  if (!streaming_) {
    buffer_.resize(kWriteBuffer);
    return;
  }
  for (auto& b : stream_buffers_) {
    void* p = nullptr;
    if (::posix_memalign(&p, kDirectAlign, kStreamBuffer) != 0) {
      ::close(fd_);
      ::unlink(temp_path_.c_str());
      detail::release_signal_cleanup(cleanup_slot_);
      throw std::bad_alloc();
    }
    b.reset(static_cast<char*>(p));
  }
}

AtomicFile::~AtomicFile() {
  if (stream_inflight_.valid()) stream_inflight_.wait();  // the writer thread uses a buffer
  if (fd_ >= 0) ::close(fd_);
  if (!published_) ::unlink(temp_path_.c_str());
  detail::release_signal_cleanup(cleanup_slot_);
}

void AtomicFile::write_all(const char* data, std::size_t bytes) {
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, data, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_system_error(str_cat("cannot write ", temp_path_));
    }
    data += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

void AtomicFile::flush_buffer() {
  write_all(buffer_.data(), buffered_);
  buffered_ = 0;
}

void AtomicFile::submit_stream_buffer(std::size_t bytes) {
  if (stream_inflight_.valid()) stream_inflight_.get();  // rethrows the writer's error
  const char* data = stream_buffers_[stream_current_].get();
  const std::uint64_t offset = stream_offset_;
  stream_inflight_ = std::async(std::launch::async, [fd = fd_, data, bytes, offset, path = temp_path_] {
    pwrite_all(fd, data, bytes, offset, path);
  });
  stream_offset_ += bytes;
  stream_current_ ^= 1;
  buffered_ = 0;
}

void AtomicFile::finish_stream() {
  if (stream_inflight_.valid()) stream_inflight_.get();
  if (buffered_ == 0) return;
  // O_DIRECT writes whole aligned blocks: pad the tail with zeros and cut the file back after.
  const std::size_t padded = (buffered_ + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
  char* tail = stream_buffers_[stream_current_].get();
  std::memset(tail + buffered_, 0, padded - buffered_);
  pwrite_all(fd_, tail, padded, stream_offset_, temp_path_);
  if (padded != buffered_ && ::ftruncate(fd_, static_cast<off_t>(size_)) != 0) {
    throw_system_error(str_cat("cannot truncate ", temp_path_));
  }
  buffered_ = 0;
}

void AtomicFile::write(const void* data, std::size_t bytes) {
  MEGATRON_ASSERT(fd_ >= 0, "write after sync on ", temp_path_);
  const char* src = static_cast<const char*>(data);
  size_ += bytes;
  if (streaming_) {
    while (bytes > 0) {
      const std::size_t n = std::min(bytes, kStreamBuffer - buffered_);
      std::memcpy(stream_buffers_[stream_current_].get() + buffered_, src, n);
      buffered_ += n;
      src += n;
      bytes -= n;
      if (buffered_ == kStreamBuffer) submit_stream_buffer(kStreamBuffer);
    }
    return;
  }
  if (buffered_ + bytes > buffer_.size()) {
    flush_buffer();
    if (bytes >= buffer_.size()) {  // large writes bypass the buffer
      write_all(src, bytes);
      return;
    }
  }
  std::memcpy(buffer_.data() + buffered_, src, bytes);
  buffered_ += bytes;
}

void AtomicFile::sync() {
  if (fd_ < 0) return;
  if (streaming_) {
    finish_stream();
    for (auto& b : stream_buffers_) b.reset();
  } else {
    flush_buffer();
  }
  if (::fsync(fd_) != 0) throw_system_error(str_cat("cannot fsync ", temp_path_));
  const int fd = fd_;
  fd_ = -1;  // closed below whatever close says: a second close could hit another file's number
  if (::close(fd) != 0) throw_system_error(str_cat("cannot close ", temp_path_));
  buffer_ = {};
}

void AtomicFile::publish() {
  sync();
  if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
    throw_system_error(str_cat("cannot rename ", temp_path_, " to ", final_path_));
  }
  published_ = true;
  detail::release_signal_cleanup(cleanup_slot_);
  cleanup_slot_ = -1;
  fsync_parent_folder(final_path_);
}

TemporaryFolder::TemporaryFolder(std::string path) : path_(std::move(path)) {
  // Registered before it exists, so that no moment leaves it outside the handler's reach.
  cleanup_slot_ = detail::register_signal_cleanup(path_, true);
  if (::mkdir(path_.c_str(), 0755) != 0) {
    const int saved_errno = errno;
    detail::release_signal_cleanup(cleanup_slot_);
    errno = saved_errno;
    throw_system_error(str_cat("cannot create folder ", path_));
  }
}

TemporaryFolder::~TemporaryFolder() {
  if (released_) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  detail::release_signal_cleanup(cleanup_slot_);
}

void TemporaryFolder::release() {
  detail::release_signal_cleanup(cleanup_slot_);
  released_ = true;
}

void install_temp_file_cleanup() {
  struct sigaction action {};
  action.sa_handler = cleanup_and_reraise;
  sigemptyset(&action.sa_mask);
  for (int signo : {SIGINT, SIGTERM, SIGHUP}) {
    // A signal ignored at start stays ignored: nohup ignores SIGHUP, and a script starts its
    // background jobs with SIGINT ignored; a handler would undo what the caller asked for.
    struct sigaction current {};
    if (sigaction(signo, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) continue;
    sigaction(signo, &action, nullptr);
  }
}

void check_readable_file(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw_system_error(str_cat(what, " ", path, " cannot be read"));
  MEGATRON_CHECK(S_ISREG(st.st_mode), what, " ", path, " is not a regular file");
  MEGATRON_CHECK(::access(path.c_str(), R_OK) == 0, what, " ", path, " is not readable (permission denied)");
}

void check_writable_parent(const std::string& path, const std::string& what) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string folder = parent.empty() ? std::string(".") : parent.string();
  struct stat st {};
  MEGATRON_CHECK(::stat(folder.c_str(), &st) == 0 && S_ISDIR(st.st_mode), what, " ", path,
                 ": folder ", folder, " does not exist; create it first");
  MEGATRON_CHECK(::access(folder.c_str(), W_OK | X_OK) == 0, what, " ", path, ": folder ", folder,
                 " is not writable");
}

std::string read_text_file(const std::string& path, const std::string& what) {
  check_readable_file(path, what);
  std::ifstream in(path, std::ios::binary);
  MEGATRON_CHECK(in.good(), "cannot open ", what, " ", path);
  std::ostringstream out;
  out << in.rdbuf();
  MEGATRON_CHECK(!in.bad(), "cannot read ", what, " ", path);
  return out.str();
}

}  // namespace megatron
