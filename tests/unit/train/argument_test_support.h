// Command lines for the argument tests (test_arguments.cpp, test_argument_rules.cpp): a small valid
// one, flags added or removed, parse options for a world size or collecting Megatron's messages,
// and the error a command line gets.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "megatron/train/arguments.h"
#include "test_support.h"

namespace megatron::train::testing {

using Args = std::vector<std::string>;

inline std::string vocab() { return megatron::testing::gpt2_vocab_file(); }
inline std::string merges() { return megatron::testing::gpt2_merges_file(); }

// A small valid command line; tests append flags (argparse: the last occurrence wins).
inline Args base() {
  return {"--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
          "--max-position-embeddings", "32", "--micro-batch-size", "2", "--train-iters", "10", "--lr", "1e-3",
          "--tokenizer-type", "NullTokenizer", "--vocab-size", "100"};
}
inline Args with(Args args, const Args& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}
// `args` minus the flag `flag` and its one value.
inline Args without(Args args, const std::string& flag) {
  const auto it = std::find(args.begin(), args.end(), flag);
  if (it != args.end()) args.erase(it, it + 2);
  return args;
}
inline ParseOptions collecting(std::vector<std::string>& messages) {
  ParseOptions options;
  options.messages = &messages;
  return options;
}
inline ParseOptions world(int world_size) {
  ParseOptions options;
  options.world_size = world_size;
  return options;
}
inline std::string problem_of(const Args& args, const ParseOptions& options = {}) {
  return megatron::testing::error_of([&] { parse_arguments(args, options); });
}

// A command line and (part of) the error it must get.
struct Invalid {
  Args args;
  std::string expected;
};

}  // namespace megatron::train::testing
