// Single-thread tokenizer throughput: the "text" values of a jsonl corpus, encoded over and over
// until at least --min-mb MB of text went through one Encoder (cache included, as in
// preprocess_data). Prints MB/s (10^6 bytes of UTF-8 text per second) and tokens/s.
// Usage: bench_tokenizer CORPUS.jsonl [VOCAB.json MERGES.txt] [--min-mb 100] [--repeats 3]
//        [TOKENIZER FLAGS]   (preprocess_data's: --tokenizer-type T --tokenizer-model M ...)
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "megatron/tokenizer/tokenizer.h"
#include "megatron/tokenizer/tokenizer_flags.h"

int main(int argc, char** argv) {
  CLI::App app{"Single-thread tokenizer throughput", "bench_tokenizer"};
  std::string corpus;
  std::vector<std::string> gpt2_files;  // VOCAB.json MERGES.txt, the older positional form
  double min_mb = 100;
  int repeats = 3;
  megatron::tokenizer::TokenizerFlags flags;
  app.add_option("corpus", corpus, "jsonl corpus")->required();
  app.add_option("gpt2_files", gpt2_files, "GPT-2 vocab.json and merges.txt")->expected(0, 2);
  app.add_option("--min-mb", min_mb, "MB of text per run")->capture_default_str();
  app.add_option("--repeats", repeats, "runs (the best is reported)")->capture_default_str();
  megatron::tokenizer::add_tokenizer_flags(app, flags);
  CLI11_PARSE(app, argc, argv);
  if (gpt2_files.size() == 2) {
    flags.given.vocab_file = gpt2_files[0];
    flags.given.merge_file = gpt2_files[1];
  }
  try {
    std::vector<std::string> texts;
    std::size_t corpus_bytes = 0;
    std::ifstream in(corpus);
    std::string line;
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line);
      const auto& t = j.at("text");
      if (t.is_string()) {
        texts.push_back(t.get<std::string>());
      } else {
        for (const auto& s : t) texts.push_back(s.get<std::string>());
      }
      corpus_bytes += texts.back().size();
    }
    const auto tokenizer = megatron::tokenizer::build_tokenizer(flags.options());
    std::printf("corpus: %s, %zu texts, %.2f MB of text; target %.0f MB per run\n", corpus.c_str(),
                texts.size(), corpus_bytes / 1e6, min_mb);
    double best = 0;
    for (int r = 0; r < repeats; ++r) {
      auto encoder = tokenizer->make_encoder();  // a fresh cache each run, as a new worker has
      std::vector<std::int32_t> ids;
      std::size_t bytes = 0, tokens = 0;
      const auto start = std::chrono::steady_clock::now();
      while (bytes < min_mb * 1e6) {
        for (const auto& t : texts) {
          ids.clear();
          encoder->encode(t, ids);
          bytes += t.size();
          tokens += ids.size();
        }
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double mbs = bytes / 1e6 / s;
      best = std::max(best, mbs);
      std::printf("run %d: %.1f MB in %.3f s: %.2f MB/s, %.2f M tokens/s\n", r + 1, bytes / 1e6, s,
                  mbs, tokens / 1e6 / s);
    }
    std::printf("best: %.2f MB/s on one thread\n", best);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
