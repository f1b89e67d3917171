// preprocess_data's engine: jsonl (plain / .gz / .zst, several files in order) -> one Megatron
// indexed dataset per JSON key, byte-identical to Megatron's tools/preprocess_data.py.
// Threads: one reader, `workers` parsing + tokenizing, and the caller's thread writing in input
// order, so the output is the same for any worker count. In-flight batches are bounded, so memory
// does not grow with the input beyond the index arrays (12 bytes per document and key).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "megatron/tokenizer/tokenizer.h"

namespace megatron::data {

struct PreprocessOptions {
  std::vector<std::string> inputs;  // files, read in this order
  std::string output_prefix;
  std::vector<std::string> json_keys{"text"};
  bool append_eod = false;
  int workers = 1;
  std::uint64_t log_interval = 1000;
  bool skip_invalid_lines = false;
  std::uint64_t max_warnings = 20;  // per-line warnings printed with skip_invalid_lines

  // Every problem found, one message each (empty when valid): also --workers above 1024, and an
  // input that is (as a file, whatever its path) one of the .bin/.idx outputs.
  std::vector<std::string> validate() const;
};

struct PreprocessStats {
  std::uint64_t documents = 0;        // JSON lines turned into documents
  std::uint64_t empty_documents = 0;  // documents without tokens (for the first key)
  std::uint64_t tokens = 0;           // over all keys, EOD included
  std::uint64_t lines_skipped = 0;    // invalid lines skipped with skip_invalid_lines
  std::uint64_t blank_lines = 0;
  std::uint64_t input_bytes = 0;      // JSON text, after decompression
  std::uint64_t file_bytes = 0;       // bytes read from disk
  double seconds = 0.0;               // processing time (after start-up)
  std::vector<std::string> output_prefixes;  // `{prefix}_{key}_document`
};

// `{output_prefix}_{key}_document`, as Megatron names it.
std::string output_prefix_for_key(const std::string& output_prefix, const std::string& key);

// Runs the whole job. `out` receives Megatron's stdout lines (Opening..., Time to startup...,
// Processing data with N workers.), `err` the progress lines and warnings. Throws
// megatron::Error naming file:line on invalid input (unless skipping); nothing is left under the
// final output names then.
PreprocessStats preprocess(const tokenizer::Tokenizer& tokenizer, const PreprocessOptions& options,
                           std::ostream& out, std::ostream& err);

}  // namespace megatron::data
