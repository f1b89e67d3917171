// generate: text from a checkpoint of any TP x PP layout (loaded into one process), streamed as it
// is produced. Megatron's sampling: --greedy, or --temperature with --top-k or --top-p, --seed;
// stops after --max-new-tokens (Megatron's tokens_to_generate) or at the end-of-document token.
// The prompt comes from --prompt or standard input. Long flags may be abbreviated.
//   build/tools/generate --load checkpoints/gpt --prompt "The quick brown fox" --max-new-tokens 40 --top-k 40
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "megatron/core/check.h"
#include "megatron/core/cli_app.h"
#include "megatron/core/torch_errors.h"
#include "megatron/interop/generation.h"
#include "megatron/interop/loaded_model.h"
#include "megatron/tokenizer/tokenizer.h"

namespace {

int run(int argc, char** argv) {
  CLI::App app{"Generate text from a megatron-cpp checkpoint", "generate"};
  app.allow_extras();
  std::string load, prompt, vocab_file, merge_file;
  std::int64_t iteration = -1;
  bool print_ids = false;
  bool ignore_eod = false;
  megatron::interop::SamplingOptions o;
  app.add_option("--load", load, "Checkpoint folder (its latest iteration)")->required();
  app.add_option("--ckpt-iteration", iteration, "Read this iteration instead of the tracker's");
  CLI::Option* prompt_option =
      app.add_option("--prompt", prompt, "Text to continue (default: standard input, less one final newline)");
  app.add_option("--max-new-tokens,--tokens-to-generate", o.max_new_tokens, "Tokens to generate at most")
      ->capture_default_str();
  app.add_flag("--greedy", o.greedy, "Always take the most likely token");
  app.add_option("--temperature", o.temperature, "Divide the logits by this before sampling")->capture_default_str();
  app.add_option("--top-k", o.top_k, "Sample among the k most likely tokens (0: all)")->capture_default_str();
  app.add_option("--top-p", o.top_p, "Sample among the most likely tokens holding probability p (0: off)")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "Random seed of the sampling")->capture_default_str();
  app.add_flag("--ignore-eod", ignore_eod, "Go on past the end-of-document token");
  app.add_option("--vocab-file", vocab_file, "GPT-2 vocab.json (default: the saved run's)");
  app.add_option("--merge-file", merge_file, "GPT-2 merges.txt (default: the saved run's)");
  app.add_flag("--print-token-ids", print_ids, "Also print the prompt's and the new token ids on standard error");
  std::vector<std::string> problems;
  if (const auto status = megatron::parse_command_line(app, argc, argv, "generate", problems)) {
    return *status;  // --help
  }
  if (o.max_new_tokens < 1) problems.push_back("--max-new-tokens must be >= 1");
  if (!(o.temperature > 0.0)) problems.push_back("--temperature must be > 0 (use --greedy for the most likely token)");
  if (o.top_k < 0) problems.push_back("--top-k must be >= 0");
  if (o.top_p < 0.0 || o.top_p > 1.0) problems.push_back("--top-p must be in [0, 1]");
  if (o.top_k > 0 && o.top_p > 0.0) problems.push_back("--top-k and --top-p cannot both be set (as in Megatron)");
  if (o.greedy && (o.top_k > 0 || o.top_p > 0.0)) problems.push_back("--greedy cannot be combined with --top-k or --top-p");
  megatron::throw_if_problems("invalid command line", problems);
  o.stop_at_eod = !ignore_eod;
  if (prompt_option->count() == 0) {
    prompt.assign(std::istreambuf_iterator<char>(std::cin), {});
    // `echo text | generate` ends the prompt with the newline echo adds: drop that one (as the
    // shell's $(...) would), so that it continues "text" as --prompt "text" does.
    if (prompt.ends_with("\r\n")) prompt.resize(prompt.size() - 2);
    else if (prompt.ends_with('\n')) prompt.pop_back();
  }

  const megatron::interop::LoadedModel loaded =
      megatron::interop::load_model(load, iteration >= 0 ? std::optional<std::int64_t>(iteration) : std::nullopt);
  const auto tokenizer = megatron::interop::saved_run_tokenizer(loaded, vocab_file, merge_file);
  std::vector<std::int64_t> ids;
  for (const std::int32_t id : tokenizer->encode(prompt)) ids.push_back(id);
  if (ids.empty()) ids.push_back(tokenizer->eod());  // start a new document
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  std::fflush(stdout);
  const auto eod = tokenizer->eod();
  megatron::tokenizer::TextStream stream(*tokenizer);  // whole characters only, as they complete
  auto print = [](const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  };
  const auto produced = megatron::interop::generate(
      *loaded.model, ids, static_cast<std::int64_t>(tokenizer->vocab_size()), eod, o, [&](std::int64_t id) {
        if (id == eod) return;
        print(stream.add(static_cast<std::int32_t>(id)));
      });
  print(stream.finish());
  std::printf("\n");
  if (print_ids) {
    auto line = [](const char* what, const std::vector<std::int64_t>& v) {
      std::fprintf(stderr, "%s:", what);
      for (const auto id : v) std::fprintf(stderr, " %lld", static_cast<long long>(id));
      std::fprintf(stderr, "\n");
    };
    line("prompt token ids", ids);
    line("generated token ids", produced);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return megatron::run_torch_tool("generate", [&] { return run(argc, argv); });
}
