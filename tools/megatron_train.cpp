// megatron_train: pretrain_gpt.py's command line in C++. Parses Megatron's flags, prints
// Megatron's start-up output and runs the trainer; errors go to stderr as one line each, with
// exit status 1 (a LibTorch error without its stack trace unless MEGATRON_BACKTRACE=1).
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>

#include "megatron/core/allocator.h"
#include "megatron/core/check.h"
#include "megatron/core/file_io.h"
#include "megatron/core/tool_main.h"
#include "megatron/train/arguments.h"
#include "megatron/train/trainer.h"

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

// A LibTorch error as one line: its message and context lines joined with "; ", no stack trace.
std::string one_line(const c10::Error& e) {
  std::string text = e.what_without_backtrace();
  std::string out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::size_t first = text.find_first_not_of(" \t", start);
    if (first < end) out += (out.empty() ? "" : "; ") + text.substr(first, end - first);
    start = end + 1;
  }
  return "LibTorch: " + out;
}

int train(const std::vector<std::string>& args) {
  megatron::install_temp_file_cleanup();
  megatron::train::ParseOptions options;
  options.world_size = env_int("WORLD_SIZE", 1);
  options.rank = env_int("RANK", 0);
  if (const char* local = std::getenv("LOCAL_RANK")) options.local_rank_env = std::atoi(local);
  std::vector<std::string> messages;
  options.messages = &messages;
  const auto parsed = megatron::train::parse_arguments(args, options);
  try {
    megatron::train::run_training(parsed, messages, std::cout);
  } catch (const c10::Error& e) {
    const char* backtrace = std::getenv("MEGATRON_BACKTRACE");
    if (backtrace != nullptr && *backtrace != '\0' && std::string(backtrace) != "0") throw;
    throw megatron::Error(one_line(e));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  megatron::keep_freed_memory_for_reuse();
  const std::vector<std::string> args(argv + 1, argv + argc);
  return megatron::run_tool("megatron_train", [&] {
    if (!megatron::train::help_requested(args)) return train(args);
    std::cout << megatron::train::help_text();
    return 0;
  });
}
