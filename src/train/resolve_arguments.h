// The step between reading flags (arguments.cpp) and the resolved Arguments: Megatron's
// validate_args plus the checks its scheduler, microbatch calculator and model make later.
// Private to the train module.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "megatron/train/arguments.h"

namespace megatron::train::detail {

struct ParseState {
  std::set<std::string> given;    // dests given on the command line
  std::set<std::string> invalid;  // dests whose value could not be read (already reported)
  std::vector<std::string> problems;
  std::vector<std::string> messages;  // start-up lines, in Megatron's order
};

// Megatron's validate_args as named phases over one Arguments, collecting problems and messages.
// The phases are split over resolve_arguments.cpp (parallel layout, batch, precision, iterations,
// model), resolve_moe.cpp (mixture of experts) and resolve_run_arguments.cpp (data, optimizer and
// schedule, tokenizer, checkpoints).
class Resolver {
 public:
  Resolver(Arguments& args, ParseState& state, const ParseOptions& options)
      : a_(args), state_(state), options_(options) {}
  void run();
  void pipeline();

 private:
  static std::string num(double value);
  static std::string num(std::int64_t value) { return std::to_string(value); }
  bool given(std::string_view dest) const { return state_.given.contains(std::string(dest)); }
  bool valid(std::string_view dest) const { return !state_.invalid.contains(std::string(dest)); }
  void problem(std::string message) { state_.problems.push_back(std::move(message)); }
  void check(bool ok, std::string message) {
    if (!ok) problem(std::move(message));
  }
  void unsupported(bool used, const std::string& what, const std::string& why = "") {
    if (used) problem(what + " is not supported by this build yet" + (why.empty() ? "" : ": " + why));
  }

  // A required flag: reports it missing or not positive; true when its value can be used.
  bool required_positive(std::string_view flag, std::string_view dest, std::int64_t value) {
    if (!given(dest)) {
      problem(std::string(flag) + " is required");
      return false;
    }
    return positive(flag, dest, value);
  }
  // A flag that must be positive when given; true when its value can be used.
  bool positive(std::string_view flag, std::string_view dest, std::int64_t value) {
    if (!valid(dest)) return false;
    if (given(dest) && value <= 0) {
      problem(std::string(flag) + " must be a positive integer, got " + num(value));
      return false;
    }
    return true;
  }
  void at_least(std::string_view flag, double value, double low, std::string_view what = "") {
    if (value < low) problem(std::string(flag) + " must be " + (what.empty() ? ">= " + num(low) : std::string(what)) + ", got " + num(value));
  }

  void parallel();
  void data_sources();
  void batch_size();
  void precision();
  void iterations();
  void recompute();
  void sequence_length(bool max_pos, int tp);
  void model();
  void moe();
  void optimizer();
  void schedule();
  void tokenizer();
  void tokenizer_file(const std::string& type, const std::string& flag, const std::optional<std::string>& path);
  void logging_and_checkpoints();

  Arguments& a_;
  ParseState& state_;
  const ParseOptions& options_;
  bool parallel_ok_ = false;  // TP/PP/CP sizes valid, runnable here and dividing the world
  bool mbs_ok_ = false;
  bool gbs_ok_ = false;
  bool iters_ok_ = false;
};

// Fills derived values and appends every problem found to state.problems.
void resolve_arguments(Arguments& args, ParseState& state, const ParseOptions& options);


}  // namespace megatron::train::detail
