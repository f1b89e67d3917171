// Messages through spdlog (see log.h): one logger per stream, its pattern the bare message (the
// prefixes are Megatron's, written here), flushed after every message so that messages and the
// console lines written to the same stream keep their order.
#include "megatron/core/log.h"

#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

#include "megatron/core/check.h"
#include "megatron/core/strings.h"

namespace megatron {
namespace {

std::atomic<int> g_level{kLogInfo};

spdlog::level::level_enum spdlog_level(int python_level) {
  if (python_level <= kLogDebug) return spdlog::level::debug;
  if (python_level <= kLogInfo) return spdlog::level::info;
  if (python_level <= kLogWarning) return spdlog::level::warn;
  if (python_level <= kLogError) return spdlog::level::err;
  return spdlog::level::critical;
}

constexpr std::string_view kWarning = "WARNING: ", kNote = "note: ";

}  // namespace

void set_log_level(int python_level) { g_level = python_level; }
int log_level() { return g_level; }

std::optional<int> log_level_from_environment() {
  const char* value = std::getenv("MEGATRON_LOGGING_LEVEL");
  if (value == nullptr) return std::nullopt;
  const std::optional<std::int64_t> level = parse_python_int(value);  // Megatron's int(os.getenv(...))
  MEGATRON_CHECK(level && *level >= std::numeric_limits<int>::min() && *level <= std::numeric_limits<int>::max(),
                 "MEGATRON_LOGGING_LEVEL='", value,
                 "' is not an integer logging level (10 DEBUG, 20 INFO, 30 WARNING, 40 ERROR, 50 CRITICAL)");
  return static_cast<int>(*level);
}

Log::Log(std::ostream& out, std::string_view source)
    : logger_(std::make_unique<spdlog::logger>("megatron",
                                               std::make_shared<spdlog::sinks::ostream_sink_st>(out, true))),
      source_(source.empty() ? "" : std::string(source) + ": ") {
  logger_->set_pattern("%v");
  logger_->set_level(spdlog::level::trace);  // the process's level is applied in write()
}

Log::~Log() = default;

void Log::write(int python_level, std::string_view prefix, std::string_view text) const {
  if (python_level < g_level.load()) return;
  logger_->log(spdlog_level(python_level), "{}{}{}", source_, prefix, text);
}

void Log::warning(std::string_view text) const { write(kLogWarning, kWarning, text); }
void Log::note(std::string_view text) const { write(kLogInfo, kNote, text); }

void Log::record(int python_level, std::string_view logger, std::string_view text) const {
  const char* name = python_level >= 50   ? "CRITICAL"
                     : python_level >= 40 ? "ERROR"
                     : python_level >= 30 ? "WARNING"
                     : python_level >= 20 ? "INFO"
                                          : "DEBUG";
  write(python_level, std::string(name) + ":" + std::string(logger) + ":", text);
}

void Log::line(std::string_view text) const {
  if (text.substr(0, kWarning.size()) == kWarning) return warning(text.substr(kWarning.size()));
  if (text.substr(0, kNote.size()) == kNote) return note(text.substr(kNote.size()));
  logger_->log(spdlog::level::critical, "{}{}", source_, text);  // not a message: always written
}

}  // namespace megatron
