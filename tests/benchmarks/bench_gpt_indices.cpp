// The GPT dataset indices of one dataset prefix split by --split, built (or mapped from the
// cache) by the same call megatron_train makes: the counterpart of megatron_gpt_indices.py
// (Megatron-LM's own build), driven by bench_gpt_indices.sh. Prints
//   ours build_s <seconds>
//   ours samples <train> <valid> <test>
// and, with --read N, the seconds to read the first N samples of each split through the
// shuffle (what the first steps do after a cached start).
// The tokenizer only names itself in the cache description (Megatron's legacy GPT-2 BPE class and
// its two files, as megatron_train does); --vocab-size 0 (the default) skips the token id scan
// of the .bin, which Megatron does not make, so both sides do the same work.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "megatron/core/cli_app.h"
#include "megatron/core/tool_main.h"
#include "megatron/data/dataset_builder.h"

namespace {

using Clock = std::chrono::steady_clock;

int run(int argc, char** argv) {
  CLI::App app{"Build the GPT dataset indices of one prefix, timed", "bench_gpt_indices"};
  std::string data_path;
  std::string cache;
  std::vector<std::int64_t> samples;
  std::int32_t seq_length = 2048;
  std::uint32_t seed = 1234;
  std::string split = "969,30,1";
  std::string vocab_file = "gpt2-vocab.json";
  std::string merge_file = "gpt2-merges.txt";
  std::uint64_t vocab_size = 0;
  std::uint64_t read = 0;
  app.add_option("--data-path", data_path, "Dataset prefix")->required();
  app.add_option("--cache", cache, "Index cache folder (--data-cache-path)")->required();
  app.add_option("--samples", samples, "Train, valid and test sample counts")
      ->required()
      ->expected(3);
  app.add_option("--seq-length", seq_length)->capture_default_str();
  app.add_option("--seed", seed)->capture_default_str();
  app.add_option("--split", split)->capture_default_str();
  app.add_option("--vocab-file", vocab_file)->capture_default_str();
  app.add_option("--merge-file", merge_file)->capture_default_str();
  app.add_option("--vocab-size", vocab_size, "Check token ids against this vocabulary (0: skip)")
      ->capture_default_str();
  app.add_option("--read", read, "Then read this many samples of each split")
      ->capture_default_str();
  std::vector<std::string> problems;
  if (const auto status = megatron::parse_command_line(app, argc, argv, "bench_gpt_indices", problems)) {
    return *status;  // --help
  }

  namespace data = megatron::data;
  data::DataPaths paths;
  paths.data_path = {data_path};
  paths.split = split;
  data::GptDatasetConfig config;
  config.random_seed = seed;
  config.sequence_length = seq_length;
  config.data_cache_path = cache;
  config.tokenizer.vocab_size = vocab_size;
  config.tokenizer.eod = 50256;
  config.tokenizer.identifiers.set("class", "_GPT2BPETokenizer");
  data::PyJson files(data::PyJson::List{});
  files.push_back(vocab_file);
  files.push_back(merge_file);
  config.tokenizer.identifiers.set("tokenizer_path", files);
  config.info = [](const std::string& line) { std::cerr << line << "\n"; };
  const data::SplitSamples requested = {samples[0], samples[1], samples[2]};

  const auto t0 = Clock::now();
  const data::GptDatasets datasets = data::build_gpt_datasets(paths, requested, config);
  const double build_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("ours build_s %.3f\nours samples", build_s);
  for (const auto& split_dataset : datasets.splits) {
    std::printf(" %llu", static_cast<unsigned long long>(split_dataset ? split_dataset->size() : 0));
  }
  std::printf("\n");
  if (read > 0) {
    std::vector<std::int64_t> text(static_cast<std::size_t>(seq_length) + 1);
    const auto t1 = Clock::now();
    for (const auto& split_dataset : datasets.splits) {
      if (!split_dataset) continue;
      for (std::uint64_t k = 0; k < read && k < split_dataset->size(); ++k) {
        split_dataset->read_text(k, text);
      }
    }
    std::printf("ours read_s %.3f\n", std::chrono::duration<double>(Clock::now() - t1).count());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return megatron::run_tool("bench_gpt_indices", [&] { return run(argc, argv); });
}
