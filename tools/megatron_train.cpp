// megatron_train: pretrain_gpt.py's command line in C++. Parses Megatron's flags, prints
// Megatron's start-up output and runs the trainer; errors go to stderr with a non-zero exit.
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "megatron/core/allocator.h"
#include "megatron/core/check.h"
#include "megatron/core/file_io.h"
#include "megatron/train/arguments.h"
#include "megatron/train/trainer.h"

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  megatron::keep_freed_memory_for_reuse();
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (megatron::train::help_requested(args)) {
    std::cout << megatron::train::help_text();
    return 0;
  }
  try {
    megatron::install_temp_file_cleanup();
    megatron::train::ParseOptions options;
    options.world_size = env_int("WORLD_SIZE", 1);
    options.rank = env_int("RANK", 0);
    if (const char* local = std::getenv("LOCAL_RANK")) options.local_rank_env = std::atoi(local);
    std::vector<std::string> messages;
    options.messages = &messages;
    const auto parsed = megatron::train::parse_arguments(args, options);
    megatron::train::run_training(parsed, messages, std::cout);
  } catch (const std::exception& e) {
    std::cout.flush();
    std::fprintf(stderr, "megatron_train: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
