// The framework's own messages, through spdlog: warnings ("WARNING: <text>"), notes ("note: <text>")
// and the lines Megatron's Python logging module prints ("INFO:<logger>:<text>"), each in the
// form Megatron users grep for. A Log writes to one stream (a rank's console stream, a tool's
// stderr), a tool's Log with its name in front ("preprocess_data: note: ..."); which messages pass is one process-wide level, Megatron's --logging-level (or
// MEGATRON_LOGGING_LEVEL) in Python's numbers: a message of level L is written when L >= the
// level (DEBUG 10, INFO 20, WARNING 30, ERROR 40, CRITICAL 50; INFO when neither is given).
// Megatron's own console lines (the start-up lines, the iteration line, validation blocks) are
// not messages: they are written to their streams as they are, whatever the level.
#pragma once

#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace spdlog {
class logger;
}

namespace megatron {

// Python's logging levels.
inline constexpr int kLogDebug = 10, kLogInfo = 20, kLogWarning = 30, kLogError = 40;

// The process's level (every Log follows it); at most one call per run, before the first message.
void set_log_level(int python_level);
int log_level();
// MEGATRON_LOGGING_LEVEL as Megatron reads it (an int), nullopt when unset; throws naming the
// variable when it is not an integer.
std::optional<int> log_level_from_environment();

class Log {
 public:
  // `source`, when given, starts every line: "<source>: ".
  explicit Log(std::ostream& out, std::string_view source = {});
  ~Log();
  Log(const Log&) = delete;
  Log& operator=(const Log&) = delete;

  void warning(std::string_view text) const;  // "WARNING: <text>", level 30
  void note(std::string_view text) const;     // "note: <text>", level 20
  // A record as Python's logging module prints it by default: "<LEVEL>:<logger>:<text>", e.g.
  // "INFO:megatron.core.datasets:Build and save the GPTDataset train indices".
  void record(int python_level, std::string_view logger, std::string_view text) const;
  // A line prepared elsewhere: "WARNING: ..." and "note: ..." lines are messages of their level,
  // anything else (Megatron's own start-up lines) is written as it is.
  void line(std::string_view text) const;

 private:
  void write(int python_level, std::string_view prefix, std::string_view text) const;

  std::unique_ptr<spdlog::logger> logger_;
  std::string source_;  // "" or "<source>: "
};

}  // namespace megatron
