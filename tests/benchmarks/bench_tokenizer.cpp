// Single-thread tokenizer throughput: the "text" values of a jsonl corpus, encoded over and over
// until at least --min-mb MB of text went through one Encoder (cache included, as in
// preprocess_data). Prints MB/s (10^6 bytes of UTF-8 text per second) and tokens/s.
// Usage: bench_tokenizer CORPUS.jsonl VOCAB.json MERGES.txt [--min-mb 100] [--repeats 3]
//        bench_tokenizer CORPUS.jsonl --tokenizer-type T --tokenizer-model M [--tiktoken-pattern v2]
//                        [--min-mb 100] [--repeats 3]      (any type build_tokenizer takes)
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "megatron/tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s CORPUS.jsonl (VOCAB.json MERGES.txt | --tokenizer-type T --tokenizer-model M) "
                 "[--tiktoken-pattern P] [--min-mb N] [--repeats N]\n", argv[0]);
    return 2;
  }
  double min_mb = 100;
  int repeats = 3;
  megatron::tokenizer::TokenizerOptions options;
  const bool named = std::strncmp(argv[2], "--", 2) == 0;
  if (!named) {
    options.vocab_file = argv[2];
    options.merge_file = argv[3];
  }
  for (int i = named ? 2 : 4; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--min-mb") == 0) min_mb = std::stod(argv[i + 1]);
    if (std::strcmp(argv[i], "--repeats") == 0) repeats = std::stoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--tokenizer-type") == 0) options.type = argv[i + 1];
    if (std::strcmp(argv[i], "--tokenizer-model") == 0) options.tokenizer_model = argv[i + 1];
    if (std::strcmp(argv[i], "--tiktoken-pattern") == 0) options.tiktoken_pattern = argv[i + 1];
  }
  try {
    std::vector<std::string> texts;
    std::size_t corpus_bytes = 0;
    std::ifstream in(argv[1]);
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
    const auto tokenizer = megatron::tokenizer::build_tokenizer(options);
    std::printf("corpus: %s, %zu texts, %.2f MB of text; target %.0f MB per run\n", argv[1],
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
