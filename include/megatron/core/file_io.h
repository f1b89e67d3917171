// Files the way every tool needs them: outputs written under a temporary name and renamed into
// place only when complete (AtomicFile), read-only memory maps (MappedFile), and checks that an
// input is readable or an output folder writable before any work starts.
// Invariant: a final name never holds a partial file, also after SIGINT/SIGTERM/SIGHUP (the
// temporaries of live AtomicFiles and TemporaryFolders are removed by the handler that
// install_temp_file_cleanup() sets); SIGKILL leftovers go at the next start (process_lock.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

namespace megatron {

class AtomicFile {
 public:
  // How the bytes reach the disk. kBuffered: through the page cache, 4 MiB buffer (small and
  // medium files). kStreaming: for files of hundreds of MB and more (checkpoints): O_DIRECT from
  // two aligned 16 MiB buffers, one filled by write() while a background thread writes the other,
  // so the disk streams at its own speed and the page cache takes no dirty pages (whose
  // write-back throttling made buffered checkpoint writes run at 15-70% of the disk here, varying
  // from run to run). Falls back to buffered writes where the file system refuses O_DIRECT.
  enum class Mode { kBuffered, kStreaming };
  // Creates `<final_path>.tmp.<pid>.<n>` exclusively; the final name is untouched until commit.
  explicit AtomicFile(std::string final_path, Mode mode = Mode::kBuffered);
  ~AtomicFile();  // unlinks the temporary unless committed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, std::size_t bytes);  // buffered
  std::uint64_t size() const { return size_; }

  // Phase 1: flush, fsync and close. Phase 2: rename onto the final name and fsync the folder.
  // Split so that a group of files (.bin + .idx) is fully on disk before any of them appears.
  void sync();
  void publish();
  void commit() {
    sync();
    publish();
  }

  const std::string& final_path() const { return final_path_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  void flush_buffer();
  void write_all(const char* data, std::size_t bytes);
  void submit_stream_buffer(std::size_t bytes);  // kStreaming: hands the current buffer to the writer thread
  void finish_stream();                           // kStreaming: waits, writes the tail, trims the padding

  std::string final_path_;
  std::string temp_path_;
  int fd_ = -1;
  int cleanup_slot_ = -1;
  bool published_ = false;
  std::uint64_t size_ = 0;
  std::vector<char> buffer_;
  std::size_t buffered_ = 0;
  // kStreaming only.
  struct AlignedFree {
    void operator()(char* p) const;
  };
  bool streaming_ = false;
  std::unique_ptr<char, AlignedFree> stream_buffers_[2];
  int stream_current_ = 0;
  std::uint64_t stream_offset_ = 0;  // where the next submitted buffer goes in the file
  std::future<void> stream_inflight_;
};

// fsyncs the folder holding `path`, so a rename into it survives a power cut (best effort).
void fsync_parent_folder(const std::string& path);
// fsyncs `folder` itself: the entries created in it (best effort, as above).
void fsync_folder(const std::string& folder);

// A folder filled under a temporary name and then renamed into place (a checkpoint's
// iter_XXXXXXX.tmp.<pid>/). Created by the constructor (its parent must exist); until release(),
// the destructor and the signal handler remove it with everything in it.
class TemporaryFolder {
 public:
  explicit TemporaryFolder(std::string path);  // throws megatron::Error naming the path
  ~TemporaryFolder();
  TemporaryFolder(const TemporaryFolder&) = delete;
  TemporaryFolder& operator=(const TemporaryFolder&) = delete;

  void release();  // after the rename: the folder is no longer this object's
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int cleanup_slot_ = -1;
  bool released_ = false;
};

// Installs SIGINT/SIGTERM/SIGHUP handlers that remove the temporaries of live AtomicFiles and
// TemporaryFolders (and the lock files of live OutputLocks), then re-raise the signal with its
// default action. A signal ignored at start (SIGHUP under nohup, SIGINT in a background job of a
// script) stays ignored. Call once from a tool's main().
void install_temp_file_cleanup();

namespace detail {
// The paths the signal handler removes: a file, or a folder with its contents. Returns the slot
// to release (-1 when the path is too long or all slots are taken: then it is not removed).
int register_signal_cleanup(const std::string& path, bool folder);
void release_signal_cleanup(int slot);
// True once the cleanup handler has begun (a signal is being handled and the process is about to
// die). A commit releases its slot first, then publishes, then checks this before it makes the
// result visible (a tracker): had the handler begun before the release, it may be removing what
// was just published. Sequentially consistent with release_signal_cleanup.
bool signal_cleanup_started();
}  // namespace detail

class MappedFile {
 public:
  MappedFile() = default;
  // kShared: read-only, pages come in as touched. kPrivatePopulated: the whole file read in by
  // the mmap call itself (MAP_POPULATE: large sequential reads, the fastest way in here), mapped
  // copy-on-write, so the memory may be handed out as writable (tensors over a checkpoint file).
  enum class Mode { kShared, kPrivatePopulated };
  explicit MappedFile(const std::string& path, Mode mode = Mode::kShared);  // throws megatron::Error naming the path
  std::uint8_t* mutable_data() const { return const_cast<std::uint8_t*>(data_); }  // kPrivatePopulated only
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::uint8_t* data() const { return data_; }
  std::uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const std::uint8_t* data_ = nullptr;
  std::uint64_t size_ = 0;
};

// Throws megatron::Error naming `what` and the path when the file is missing, not a regular
// file, or unreadable.
void check_readable_file(const std::string& path, const std::string& what);

// Throws when the folder that would hold `path` does not exist or is not writable.
void check_writable_parent(const std::string& path, const std::string& what);

// Whole file into a string (for small inputs: vocab, merges).
std::string read_text_file(const std::string& path, const std::string& what);

}  // namespace megatron
