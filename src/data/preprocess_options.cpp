// PreprocessOptions' checks and the output names (see preprocess.h).
#include <filesystem>
#include <string>
#include <vector>

#include "megatron/core/check.h"
#include "megatron/data/preprocess.h"

namespace megatron::data {

namespace {
constexpr int kMaxWorkers = 1024;  // more threads than any machine has cores only cost memory
}  // namespace

std::string output_prefix_for_key(const std::string& output_prefix, const std::string& key) {
  return output_prefix + "_" + key + "_document";
}

std::vector<std::string> PreprocessOptions::validate() const {
  std::vector<std::string> problems;
  if (inputs.empty()) problems.push_back("--input: no input file given");
  if (output_prefix.empty()) problems.push_back("--output-prefix is required");
  if (json_keys.empty()) problems.push_back("--json-keys: give at least one key");
  for (std::size_t i = 0; i < json_keys.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (json_keys[i] == json_keys[j]) problems.push_back("--json-keys: \"" + json_keys[i] + "\" is given twice");
    }
  }
  if (workers < 1) problems.push_back("--workers must be at least 1 (got " + std::to_string(workers) + ")");
  if (workers > kMaxWorkers) {
    problems.push_back(str_cat("--workers ", workers, " is more than ", kMaxWorkers,
                               " threads; more workers than cores only cost memory: use at most the number of cores"));
  }
  // An input that is one of the outputs would be truncated before it is read.
  for (const auto& input : inputs) {
    for (const auto& key : json_keys) {
      for (const char* ext : {".bin", ".idx"}) {
        const std::string output = output_prefix_for_key(output_prefix, key) + ext;
        std::error_code ec;
        if (!output_prefix.empty() && std::filesystem::equivalent(input, output, ec)) {
          problems.push_back(str_cat("--input ", input, " is the output file ", output,
                                     " (the same file by real path); it would be overwritten: choose another "
                                     "--output-prefix"));
        }
      }
    }
  }
  if (log_interval < 1) problems.push_back("--log-interval must be at least 1");
  return problems;
}

}  // namespace megatron::data
