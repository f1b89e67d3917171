// merge_datasets: Megatron's tools/merge_datasets.py. Appends every X.bin/X.idx pair of a folder
// (sorted by name) into one dataset; see megatron::data::merge_datasets. Long flags may be
// abbreviated, as argparse allows.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "abbreviated_cli.h"
#include "megatron/core/check.h"
#include "megatron/core/file_io.h"
#include "megatron/data/indexed_dataset.h"

int main(int argc, char** argv) {
  CLI::App app{"Merge every .bin/.idx dataset pair of a folder into one dataset"};
  app.allow_extras();
  std::string input;
  std::string output_prefix;
  bool multimodal = false;
  app.add_option("--input", input, "Folder holding the .bin/.idx pairs to merge (sorted by name)")
      ->required();
  app.add_option("--output-prefix", output_prefix,
                 "Path prefix of the merged dataset (its folder must exist), without .bin/.idx")
      ->required();
  app.add_flag("--multimodal", multimodal, "Merge multimodal datasets (not supported yet)");
  std::vector<std::string> problems;
  try {
    problems = megatron::tools::parse_abbreviated(app, argc, argv);  // argparse's abbreviations
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    megatron::throw_if_problems("invalid command line", problems);
    MEGATRON_CHECK(!multimodal, "--multimodal: multimodal datasets are not supported yet; only "
                   "text datasets can be merged");
    megatron::install_temp_file_cleanup();
    const std::vector<std::string> merged = megatron::data::merge_datasets(input, output_prefix);
    for (const std::string& prefix : merged) std::printf("merged %s\n", prefix.c_str());
    const megatron::data::IndexedDataset result(output_prefix);
    std::printf("wrote %s.{bin,idx}: %zu datasets, %zu documents, %zu sequences, %llu tokens (%s)"
                "\n", output_prefix.c_str(), merged.size(), result.num_documents(),
                result.num_sequences(), static_cast<unsigned long long>(result.num_tokens()),
                megatron::data::dtype_name(result.dtype()));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
