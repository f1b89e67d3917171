// OutputLock and the start-up removal of dead runs' temporaries (see process_lock.h). Linux:
// the holder's command line comes from /proc/self/cmdline.
#include "megatron/core/process_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "megatron/core/check.h"
#include "megatron/core/file_io.h"

namespace megatron {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kCommandMax = 300;
constexpr int kLockAttempts = 8;
constexpr std::size_t kNamesShown = 5;

std::string own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!text.empty() && text.back() == '\0') text.pop_back();
  for (char& c : text) {
    if (c == '\0' || c == '\n') c = ' ';
  }
  if (text.size() > kCommandMax) text = text.substr(0, kCommandMax) + "...";
  return text;
}

// "pid 1234 (preprocess_data --input ...)" from what the holder wrote; a pid that no longer runs
// means the holder has not written its own line yet.
std::string describe_holder(const std::string& lock_path) {
  std::ifstream in(lock_path, std::ios::binary);
  std::string pid_line;
  std::string command;
  std::getline(in, pid_line);
  std::getline(in, command);
  char* end = nullptr;
  const long pid = std::strtol(pid_line.c_str(), &end, 10);
  if (pid <= 0 || end == pid_line.c_str() || *end != '\0' || (::kill(pid, 0) != 0 && errno == ESRCH)) {
    return "another process (it has not recorded its pid yet)";
  }
  return str_cat("process ", pid, command.empty() ? "" : str_cat(" (", command, ")"));
}

bool same_file(int fd, const std::string& path) {
  struct stat by_fd {};
  struct stat by_path {};
  return ::fstat(fd, &by_fd) == 0 && ::stat(path.c_str(), &by_path) == 0 && by_fd.st_dev == by_path.st_dev &&
         by_fd.st_ino == by_path.st_ino;
}

bool all_digits(std::string_view s) {
  if (s.empty() || s.size() > 18) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

OutputLock::OutputLock(std::string lock_path, const std::string& what) : path_(std::move(lock_path)) {
  // A holder removes the file when it lets go; a lock taken on a file that was removed (or
  // replaced) meanwhile protects nothing, hence the check of the name after locking.
  for (int attempt = 0; attempt < kLockAttempts; ++attempt) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw_system_error(str_cat(what, ": cannot create the lock file ", path_));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd_);
      fd_ = -1;
      if (err == EWOULDBLOCK) {
        throw_error(str_cat(what, ": ", describe_holder(path_), " is writing the same output (it holds the lock ",
                            path_, "); wait for it to finish, stop it, or write elsewhere"));
      }
      note_ = str_cat("cannot lock ", path_, " (", std::strerror(err),
                      "): a second run writing the same output would not be detected");
      return;
    }
    if (same_file(fd_, path_)) break;
    ::close(fd_);
    fd_ = -1;
  }
  MEGATRON_CHECK(fd_ >= 0, what, ": the lock file ", path_, " keeps being replaced; is another run starting?");
  cleanup_slot_ = detail::register_signal_cleanup(path_, false);
  const std::string record = str_cat(::getpid(), "\n", own_command_line(), "\n");
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, record.data(), record.size(), 0) < 0) {
    note_ = str_cat("cannot record this process in ", path_, " (", std::strerror(errno), ")");
  }
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  detail::release_signal_cleanup(cleanup_slot_);
  ::unlink(path_.c_str());  // while still locked: the next run creates a fresh file
  ::close(fd_);
}

std::optional<TemporaryName> parse_temporary_name(std::string_view file_name) {
  const std::size_t at = file_name.rfind(".tmp.");
  if (at == std::string_view::npos || at == 0) return std::nullopt;
  std::string_view rest = file_name.substr(at + 5);
  const std::size_t dot = rest.find('.');
  const std::string_view pid = rest.substr(0, dot);
  if (!all_digits(pid)) return std::nullopt;
  if (dot != std::string_view::npos && !all_digits(rest.substr(dot + 1))) return std::nullopt;
  return TemporaryName{std::string(file_name.substr(0, at)), std::stol(std::string(pid))};
}

bool temporary_owner_is_gone(long pid) {
  if (pid <= 0) return false;
  if (pid == static_cast<long>(::getpid())) return true;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

std::vector<std::string> remove_stale_temporaries(const std::string& folder,
                                                  const std::function<bool(std::string_view)>& is_output,
                                                  bool any_owner) {
  std::vector<std::string> removed;
  std::error_code ec;
  fs::directory_iterator it(folder.empty() ? fs::path(".") : fs::path(folder), ec);
  if (ec) return removed;
  std::vector<fs::path> stale;
  for (const fs::directory_entry& entry : it) {
    const auto name = parse_temporary_name(entry.path().filename().string());
    if (name && is_output(name->base) && (any_owner || temporary_owner_is_gone(name->pid))) stale.push_back(entry.path());
  }
  for (const fs::path& path : stale) {
    fs::remove_all(path, ec);
    if (!ec) removed.push_back(path.string());
  }
  return removed;
}

std::vector<std::string> remove_stale_temporaries_of(const std::vector<std::string>& final_paths) {
  std::map<std::string, std::vector<std::string>> by_folder;
  for (const std::string& path : final_paths) {
    const fs::path p(path);
    by_folder[p.parent_path().string()].push_back(p.filename().string());
  }
  std::vector<std::string> removed;
  for (const auto& [folder, names] : by_folder) {
    const auto is_output = [&names](std::string_view base) {
      for (const std::string& name : names) {
        if (base == name) return true;
      }
      return false;
    };
    for (auto& path : remove_stale_temporaries(folder, is_output)) removed.push_back(std::move(path));
  }
  return removed;
}

std::string describe_removed_temporaries(const std::vector<std::string>& removed) {
  if (removed.empty()) return "";
  std::string line = str_cat("removed ", removed.size(), removed.size() == 1 ? " temporary" : " temporaries",
                             " left by runs that did not finish: ");
  for (std::size_t i = 0; i < removed.size() && i < kNamesShown; ++i) line += (i > 0 ? ", " : "") + removed[i];
  if (removed.size() > kNamesShown) line += str_cat(" and ", removed.size() - kNamesShown, " more");
  return line;
}

}  // namespace megatron
