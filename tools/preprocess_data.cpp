// preprocess_data: jsonl -> Megatron .bin/.idx with tools/preprocess_data.py's flags and output.
// Parses flags, checks every input and output up front, runs data::preprocess, prints a summary.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <thread>

#include "megatron/core/check.h"
#include "megatron/core/cli.h"
#include "megatron/core/cli_app.h"
#include "megatron/core/file_io.h"
#include "megatron/core/log.h"
#include "megatron/core/process_lock.h"
#include "megatron/core/strings.h"
#include "megatron/core/tool_main.h"
#include "megatron/data/dtype.h"
#include "megatron/data/jsonl_reader.h"
#include "megatron/data/preprocess.h"
#include "megatron/tokenizer/tokenizer.h"
#include "megatron/tokenizer/tokenizer_flags.h"

namespace {

// Megatron flags this build recognises but cannot honour yet, with the reason.
struct Unsupported {
  const char* flag;
  const char* why;
};
constexpr Unsupported kUnsupported[] = {
    {"--split-sentences", "sentence splitting (NLTK punkt) is not implemented yet"},
    {"--keep-newlines", "sentence splitting (NLTK punkt) is not implemented yet"},
    {"--lang", "sentence splitting (NLTK punkt) is not implemented yet"},
    {"--keep-sequential-samples", "partitions are not needed: inputs are read in order by one reader"},
    {"--find-optimal-num-workers", "the worker benchmark mode is not implemented"},
    {"--workers-to-check", "the worker benchmark mode is not implemented"},
    {"--max-documents", "the worker benchmark mode is not implemented"},
    {"--tokenizer-special-tokens", "added special tokens are not implemented (TikTokenizer takes --tiktoken-special-tokens)"},
};

// Flags of older Megatron versions that the guides still use; they change nothing here.
constexpr megatron::LegacyFlag kLegacy[] = {
    {"--dataset-impl", "lazy cached mmap", "mmap", "Megatron's mmap format is the only one written",
     "only Megatron's mmap .bin/.idx format is written (Megatron dropped the lazy and cached formats)"},
    {"--chunk-size", "int", "", "the workers take documents in batches of their own size; the output does not depend on it", ""},
    {"--legacy-tokenizer", "", "", "GPT2BPETokenizer is always Megatron's original GPT-2 tokenizer here", ""},
};
// Old spellings that argparse's abbreviations made work and that later flags made ambiguous.
const std::map<std::string, std::string, std::less<>> kAliases = {{"--vocab", "--vocab-file"}};

// The legacy flags given on the command line, with their values ("" for a store_true flag).
std::map<std::string, std::string, std::less<>> given_legacy_flags(const CLI::App& app) {
  std::map<std::string, std::string, std::less<>> given;
  for (const auto& legacy : kLegacy) {
    const CLI::Option* option = app.get_option(std::string(legacy.flag));
    if (option->count() == 0) continue;
    const std::string value = option->results().empty() ? "" : option->results().back();
    given[std::string(legacy.flag)] = legacy.takes.empty() && value == "true" ? "" : value;
  }
  return given;
}

// The command line: Megatron's preprocess_data.py flags into PreprocessOptions and the tokenizer.
struct CommandLine {
  megatron::data::PreprocessOptions options;
  megatron::tokenizer::TokenizerFlags tokenizer_flags;
  std::vector<std::string> input_patterns;
  int partitions = 1;
  int workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::int64_t log_interval = static_cast<std::int64_t>(options.log_interval);  // signed: -1 is refused, not wrapped
  std::int64_t vocab_extra_ids = 0;  // parsed and dropped: Megatron's preprocess_data sets it to 0
  std::vector<std::string> unsupported_given;
};

void add_flags(CLI::App& app, CommandLine& c) {
  app.allow_extras();
  // --input and --output-prefix are required; validate() reports them missing, together with
  // every other problem, rather than CLI11 stopping at the first.
  app.add_option("--input", c.input_patterns, "(required) input jsonl files or glob patterns, read in order");
  app.add_option("--output-prefix", c.options.output_prefix, "(required) writes PREFIX_KEY_document.bin/.idx");
  app.add_option("--json-keys", c.options.json_keys, "keys to extract, one dataset each")->capture_default_str();
  app.add_flag("--append-eod", c.options.append_eod, "append the EOD token to each non-empty document");
  app.add_option("--workers", c.workers, "tokenizing threads (default: the number of cores)")->capture_default_str();
  app.add_option("--partitions", c.partitions, "accepted for compatibility; only 1 is supported")->capture_default_str();
  app.add_option("--log-interval", c.log_interval, "progress line every N documents")->capture_default_str();
  megatron::tokenizer::add_tokenizer_flags(app, c.tokenizer_flags);
  app.add_option("--vocab-extra-ids", c.vocab_extra_ids,
                 "accepted and ignored, as Megatron's preprocess_data does (it always uses 0)");
  app.add_flag("--skip-invalid-lines", c.options.skip_invalid_lines,
               "skip lines that are not valid documents (warn, count) instead of failing");
  for (const auto& u : kUnsupported) {
    app.add_option(u.flag, c.unsupported_given, u.why)->expected(0, 1)->group("");
  }
  for (const auto& legacy : kLegacy) {
    const std::string flag(legacy.flag);
    if (legacy.takes.empty()) {
      app.add_flag(flag)->description(std::string(legacy.note))->group("");
    } else {
      app.add_option(flag)->description(std::string(legacy.note))->expected(0, 1)->group("");
    }
  }
}

// Every problem of the parsed command line, each input and output checked before any work starts;
// the tokenizer when it can be built.
std::vector<std::string> check(const CLI::App& app, CommandLine& c,
                               std::unique_ptr<megatron::tokenizer::Tokenizer>& tokenizer) {
  std::vector<std::string> problems;
  for (const auto& u : kUnsupported) {
    if (app.count(u.flag) > 0) problems.push_back(std::string(u.flag) + " is not supported yet: " + u.why);
  }
  if (c.partitions != 1) {
    problems.push_back("--partitions " + std::to_string(c.partitions) +
                       " is not supported: inputs are already read in parallel; use --workers");
  }
  megatron::data::PreprocessOptions& options = c.options;
  options.workers = c.workers;
  if (c.log_interval < 1) {
    problems.push_back("--log-interval must be at least 1, got " + std::to_string(c.log_interval));
  } else {
    options.log_interval = static_cast<std::uint64_t>(c.log_interval);
  }
  bool inputs_ok = true;
  for (const auto& pattern : c.input_patterns) {
    try {
      for (auto& file : megatron::data::expand_inputs({pattern})) options.inputs.push_back(std::move(file));
    } catch (const megatron::Error& e) {
      problems.push_back(e.what());
      inputs_ok = false;
    }
  }
  // Bad --input values are reported above; validate the rest as if the inputs were fine.
  megatron::data::PreprocessOptions to_validate = options;
  if (!inputs_ok) to_validate.inputs = c.input_patterns;
  for (const auto& p : to_validate.validate()) problems.push_back(p);
  for (const auto& key : options.output_prefix.empty() ? std::vector<std::string>{} : options.json_keys) {
    try {
      megatron::check_writable_parent(megatron::data::output_prefix_for_key(options.output_prefix, key),
                                      "--output-prefix");
    } catch (const megatron::Error& e) {
      problems.push_back(e.what());
      break;
    }
  }
  try {
    tokenizer = megatron::tokenizer::build_tokenizer(c.tokenizer_flags.options());
  } catch (const megatron::Error& e) {
    problems.push_back(e.what());
  }
  if (tokenizer && options.append_eod && tokenizer->eod() < 0) {
    problems.push_back("--append-eod: " + tokenizer->type() + " has no end-of-document token (the --tokenizer-model "
                       "has no EOS piece or eos_token); drop --append-eod");
  }
  return problems;
}

// One writer per output (its lock); then the temporaries of runs of it that died are removed.
std::vector<std::unique_ptr<megatron::OutputLock>> take_outputs(const megatron::data::PreprocessOptions& options,
                                                                const megatron::Log& log) {
  std::vector<std::unique_ptr<megatron::OutputLock>> locks;
  std::vector<std::string> finals;
  for (const auto& key : options.json_keys) {
    const std::string prefix = megatron::data::output_prefix_for_key(options.output_prefix, key);
    locks.push_back(
        std::make_unique<megatron::OutputLock>(prefix + ".lock", "--output-prefix " + options.output_prefix));
    const std::string& note = locks.back()->note();
    if (!note.empty()) log.note(note);
    finals.insert(finals.end(), {prefix + ".bin", prefix + ".idx"});
  }
  const std::string removed = megatron::describe_removed_temporaries(megatron::remove_stale_temporaries_of(finals));
  if (!removed.empty()) log.note(removed);
  return locks;
}

void print_summary(const megatron::data::PreprocessStats& stats, const megatron::tokenizer::Tokenizer& tokenizer) {
  const double mb = static_cast<double>(stats.input_bytes) / 1e6;
  std::printf("Done: %llu documents (%llu empty), %llu tokens, %.2f MB of JSON%s in %.2f s (%.2f MB/s); "
              "%llu invalid lines skipped, %llu blank lines\n",
              static_cast<unsigned long long>(stats.documents),
              static_cast<unsigned long long>(stats.empty_documents),
              static_cast<unsigned long long>(stats.tokens), mb,
              stats.file_bytes != stats.input_bytes
                  ? (" (" + megatron::human_bytes(stats.file_bytes) + " on disk)").c_str()
                  : "",
              stats.seconds, stats.seconds > 0 ? mb / stats.seconds : 0.0,
              static_cast<unsigned long long>(stats.lines_skipped),
              static_cast<unsigned long long>(stats.blank_lines));
  const char* dtype = megatron::data::dtype_name(megatron::data::optimal_token_dtype(tokenizer.vocab_size()));
  for (const auto& prefix : stats.output_prefixes) std::printf("Wrote %s.bin and %s.idx (%s)\n", prefix.c_str(), prefix.c_str(), dtype);
}

int run(int argc, char** argv) {
  megatron::install_temp_file_cleanup();
  CommandLine c;
  CLI::App app{"Turn jsonl (plain, .gz, .zst) into Megatron .bin/.idx datasets, byte-identical to "
               "Megatron-LM's tools/preprocess_data.py", "preprocess_data"};
  add_flags(app, c);
  std::vector<std::string> problems;
  std::vector<std::string> notes;
  try {
    problems = megatron::parse_abbreviated(app, argc, argv, notes, kAliases);
  } catch (const CLI::ParseError& e) {
    return megatron::usage_error(app, e);
  }
  megatron::check_legacy_flags(kLegacy, given_legacy_flags(app), notes, problems);
  const megatron::Log log(std::cerr, "preprocess_data");
  for (const auto& note : notes) log.line(note);
  std::unique_ptr<megatron::tokenizer::Tokenizer> tokenizer;
  for (auto& p : check(app, c, tokenizer)) problems.push_back(std::move(p));
  megatron::throw_if_problems("invalid command line", problems);

  const auto locks = take_outputs(c.options, log);
  print_summary(megatron::data::preprocess(*tokenizer, c.options, std::cout, std::cerr), *tokenizer);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return megatron::run_tool("preprocess_data", [&] { return run(argc, argv); });
}
