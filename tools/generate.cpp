// generate: text from a checkpoint of any TP x PP layout (loaded into one process), streamed as it
// is produced. Megatron's sampling: --greedy, or --temperature with --top-k or --top-p, --seed;
// stops after --max-new-tokens (Megatron's tokens_to_generate) or at the end-of-document token.
// The prompt comes from --prompt or standard input. As in Megatron, the prompt and --max-new-tokens
// must fit the model's learned positions (checked before anything is printed). Long flags may be
// abbreviated.
//   build/tools/generate --load checkpoints/gpt --prompt "The quick brown fox" --max-new-tokens 40 --top-k 40
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <iostream>
#include <string>

#include "megatron/core/check.h"
#include "megatron/core/cli_app.h"
#include "megatron/core/log.h"
#include "megatron/core/torch_errors.h"
#include "megatron/interop/generation.h"
#include "megatron/interop/loaded_model.h"
#include "megatron/tokenizer/tokenizer.h"

namespace {

// The prompt from standard input, which must be open and readable: a closed one is not an empty
// prompt. From a terminal, the user is told how to end it.
std::string read_prompt(const megatron::Log& log) {
  MEGATRON_CHECK(::fcntl(STDIN_FILENO, F_GETFD) != -1,
                 "standard input is closed: give the text to continue with --prompt, or on standard input");
  if (::isatty(STDIN_FILENO)) log.note("reading the prompt from the terminal; end it with Ctrl-D");
  std::string prompt;
  char buffer[1 << 16];
  for (;;) {  // read(2) itself: a stream would take a read error (a folder as input) for the end
    const ssize_t n = ::read(STDIN_FILENO, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) megatron::throw_system_error("cannot read the prompt from standard input");
    if (n == 0) break;
    prompt.append(buffer, static_cast<std::size_t>(n));
  }
  // `echo text | generate` ends the prompt with the newline echo adds: drop that one (as the
  // shell's $(...) would), so that it continues "text" as --prompt "text" does.
  if (prompt.ends_with("\r\n")) prompt.resize(prompt.size() - 2);
  else if (prompt.ends_with('\n')) prompt.pop_back();
  return prompt;
}

struct CommandLine {
  std::string load, prompt;
  megatron::tokenizer::TokenizerChoice tokenizer_files;
  std::int64_t iteration = 0;
  bool print_ids = false;
  bool ignore_eod = false;
  std::string seed;
  megatron::interop::SamplingOptions sampling;
  CLI::Option* prompt_option = nullptr;
};

void add_flags(CLI::App& app, CommandLine& c) {
  megatron::interop::SamplingOptions& o = c.sampling;
  app.allow_extras();
  app.add_option("--load", c.load, "Checkpoint folder (its latest iteration)")->required();
  app.add_option("--ckpt-iteration", c.iteration, "Read this iteration instead of the tracker's");
  c.prompt_option =
      app.add_option("--prompt", c.prompt, "Text to continue (default: standard input, less one final newline)");
  app.add_option("--max-new-tokens,--tokens-to-generate", o.max_new_tokens, "Tokens to generate at most")
      ->capture_default_str();
  app.add_flag("--greedy", o.greedy, "Always take the most likely token");
  app.add_option("--temperature", o.temperature, "Divide the logits by this before sampling")->capture_default_str();
  app.add_option("--top-k", o.top_k, "Sample among the k most likely tokens (0: all)")->capture_default_str();
  app.add_option("--top-p", o.top_p, "Sample among the most likely tokens holding probability p (0: off)")
      ->capture_default_str();
  c.seed = std::to_string(o.seed);
  app.add_option("--seed", c.seed, "Random seed of the sampling, 0 to 2^64 - 1")->capture_default_str();
  app.add_flag("--ignore-eod", c.ignore_eod, "Go on past the end-of-document token");
  app.add_option("--vocab-file", c.tokenizer_files.vocab_file,
                 "GPT-2 vocab.json (default: the checkpoint's copy, else the saved run's)");
  app.add_option("--merge-file", c.tokenizer_files.merge_file,
                 "GPT-2 merges.txt (default: the checkpoint's copy, else the saved run's)");
  app.add_option("--tokenizer-model", c.tokenizer_files.tokenizer_model,
                 "The other tokenizer types' file or folder (default: the checkpoint's copy, else the saved run's)");
  app.add_flag("--print-token-ids", c.print_ids, "Also print the prompt's and the new token ids on standard error");
}

// The sampling flags' problems (Megatron's text generation server's bounds, written so that NaN
// fails them too); the seed parsed into the options.
void check(CommandLine& c, std::vector<std::string>& problems) {
  megatron::interop::SamplingOptions& o = c.sampling;
  if (o.max_new_tokens < 1) problems.push_back("--max-new-tokens must be >= 1");
  if (!(o.temperature > 0.0 && o.temperature <= 100.0)) {
    problems.push_back("--temperature must be a positive number up to 100 (use --greedy for the most likely token)");
  }
  if (o.top_k < 0) problems.push_back("--top-k must be >= 0");
  if (!(o.top_p >= 0.0 && o.top_p <= 1.0)) problems.push_back("--top-p must be in [0, 1]");
  const char* const seed_end = c.seed.data() + c.seed.size();
  if (const auto [end, error] = std::from_chars(c.seed.data(), seed_end, o.seed); error != std::errc() || end != seed_end) {
    problems.push_back("--seed " + c.seed + ": expected a whole number from 0 to 18446744073709551615");
  }
  if (o.top_k > 0 && o.top_p > 0.0) problems.push_back("--top-k and --top-p cannot both be set (as in Megatron)");
  if (o.greedy && (o.top_k > 0 || o.top_p > 0.0)) problems.push_back("--greedy cannot be combined with --top-k or --top-p");
  o.stop_at_eod = !c.ignore_eod;
}

// The prompt's ids; an empty prompt starts a new document from the end-of-document token.
std::vector<std::int64_t> prompt_ids(const megatron::tokenizer::Tokenizer& tokenizer, const std::string& prompt,
                                     const megatron::Log& log) {
  std::vector<std::int64_t> ids;
  for (const std::int32_t id : tokenizer.encode(prompt)) ids.push_back(id);
  if (ids.empty()) {
    MEGATRON_CHECK(tokenizer.eod() >= 0, "the prompt is empty and the ", tokenizer.type(),
                   " has no end-of-document token to start a document from: give --prompt");
    log.note("the prompt is empty: generating a new document from the end-of-document token");
    ids.push_back(tokenizer.eod());
  }
  return ids;
}

void print_ids(const char* what, const std::vector<std::int64_t>& ids) {
  std::fprintf(stderr, "%s:", what);
  for (const auto id : ids) std::fprintf(stderr, " %lld", static_cast<long long>(id));
  std::fprintf(stderr, "\n");
}

int run(int argc, char** argv) {
  CLI::App app{"Generate text from a megatron-cpp checkpoint", "generate"};
  CommandLine c;
  add_flags(app, c);
  std::vector<std::string> problems;
  if (const auto status = megatron::parse_command_line(app, argc, argv, "generate", problems)) {
    return *status;  // --help
  }
  check(c, problems);
  megatron::throw_if_problems("invalid command line", problems);
  const megatron::Log log(std::cerr, "generate");
  if (c.prompt_option->count() == 0) c.prompt = read_prompt(log);

  const megatron::interop::LoadedModel loaded =
      megatron::interop::load_model(c.load, app.count("--ckpt-iteration") ? std::optional(c.iteration) : std::nullopt);
  const auto run_tokenizer = megatron::interop::saved_run_tokenizer(loaded, c.tokenizer_files);
  const megatron::tokenizer::Tokenizer& tokenizer = *run_tokenizer.tokenizer;
  const std::vector<std::int64_t> ids = prompt_ids(tokenizer, c.prompt, log);
  megatron::interop::check_fits(loaded.config, static_cast<std::int64_t>(ids.size()), c.sampling.max_new_tokens);
  auto print = [](const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  };
  print(c.prompt);
  const auto eod = tokenizer.eod();
  megatron::tokenizer::TextStream stream(tokenizer);  // whole characters only, as they complete
  const auto produced = megatron::interop::generate(
      *loaded.model, ids, static_cast<std::int64_t>(tokenizer.vocab_size()), eod, c.sampling, [&](std::int64_t id) {
        if (id == eod) return;
        print(stream.add(static_cast<std::int32_t>(id)));
      });
  print(stream.finish());
  std::printf("\n");
  if (c.print_ids) {
    print_ids("prompt token ids", ids);
    print_ids("generated token ids", produced);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return megatron::run_torch_tool("generate", [&] { return run(argc, argv); });
}
