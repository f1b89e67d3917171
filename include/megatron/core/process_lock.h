// What a tool does about other processes writing the same outputs: an advisory lock per output
// (OutputLock: a second run fails at start naming the holder) and, at start, the removal of
// temporaries left by runs that died (SIGKILL, power loss) before they could clean up.
// Not handled: a live writer on another host of a shared file system has a pid this host cannot
// see; the lock (when the file system supports flock) is what keeps such a run away.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace megatron {

// flock(LOCK_EX | LOCK_NB) on `lock_path`, held until destruction or process exit (the kernel
// drops it also on SIGKILL). The file records the holder's pid and command line; it is removed
// when the lock is given up (also by the signal handler of install_temp_file_cleanup()).
class OutputLock {
 public:
  // Throws megatron::Error naming `what` (e.g. "--save ckpt"), the lock file and the holder when
  // another process holds it. Where the file system cannot lock, runs unlocked and says so in note().
  OutputLock(std::string lock_path, const std::string& what);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

  const std::string& path() const { return path_; }
  const std::string& note() const { return note_; }  // empty when locked

 private:
  std::string path_;
  std::string note_;
  int fd_ = -1;
  int cleanup_slot_ = -1;
};

// "<base>.tmp.<pid>" or "<base>.tmp.<pid>.<n>", the names AtomicFile and the checkpoint writer use.
struct TemporaryName {
  std::string base;
  long pid = 0;
};
std::optional<TemporaryName> parse_temporary_name(std::string_view file_name);

// True when no process with this pid runs here, or when the pid is this process's own: called at
// start, before this process made any temporary, a name with our pid is from a reused pid.
bool temporary_owner_is_gone(long pid);

// Removes the entries of `folder` (files, or folders with their contents) whose name is a
// temporary name of a base accepted by `is_output` and whose process is gone. Returns their paths.
// Call at start, after taking the OutputLock of those outputs. A missing folder holds nothing.
// `any_owner`: remove them whatever their pid says. Right when a lock that really locks is held
// over every writer of these outputs: then no other process can be writing them, and the pid
// test (which sees only this node's processes) must not keep a temporary of a job that ran on
// another node whose pid is taken here.
std::vector<std::string> remove_stale_temporaries(const std::string& folder,
                                                  const std::function<bool(std::string_view)>& is_output,
                                                  bool any_owner = false);

// The temporaries of these final paths (each `<path>.tmp.<pid>.<n>` in the path's folder).
std::vector<std::string> remove_stale_temporaries_of(const std::vector<std::string>& final_paths);

// One line for the log: "removed 2 temporaries left by runs that did not finish: a, b"; empty
// when nothing was removed.
std::string describe_removed_temporaries(const std::vector<std::string>& removed);

}  // namespace megatron
