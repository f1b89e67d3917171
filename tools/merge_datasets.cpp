// merge_datasets: Megatron's tools/merge_datasets.py. Appends every X.bin/X.idx pair of a folder
// (sorted by name) into one dataset; see megatron::data::merge_datasets. Long flags may be
// abbreviated, as argparse allows.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <string>

#include "megatron/core/check.h"
#include "megatron/core/cli_app.h"
#include "megatron/core/file_io.h"
#include "megatron/core/log.h"
#include "megatron/core/process_lock.h"
#include "megatron/core/tool_main.h"
#include "megatron/data/indexed_dataset.h"

namespace {

int run(int argc, char** argv) {
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
  if (const auto status = megatron::parse_command_line(app, argc, argv, "merge_datasets", problems)) {
    return *status;  // --help
  }
  megatron::throw_if_problems("invalid command line", problems);
  MEGATRON_CHECK(!multimodal, "--multimodal: multimodal datasets are not supported yet; only "
                 "text datasets can be merged");
  megatron::install_temp_file_cleanup();
  megatron::check_writable_parent(output_prefix + ".lock", "--output-prefix");
  const megatron::OutputLock lock(output_prefix + ".lock", "--output-prefix " + output_prefix);
  const megatron::Log log(std::cerr, "merge_datasets");
  if (!lock.note().empty()) log.note(lock.note());
  const std::string removed = megatron::describe_removed_temporaries(
      megatron::remove_stale_temporaries_of({output_prefix + ".bin", output_prefix + ".idx"}));
  if (!removed.empty()) log.note(removed);
  const std::vector<std::string> merged = megatron::data::merge_datasets(input, output_prefix);
  for (const std::string& prefix : merged) std::printf("merged %s\n", prefix.c_str());
  const megatron::data::IndexedDataset result(output_prefix);
  std::printf("wrote %s.{bin,idx}: %zu datasets, %zu documents, %zu sequences, %llu tokens (%s)"
              "\n", output_prefix.c_str(), merged.size(), result.num_documents(),
              result.num_sequences(), static_cast<unsigned long long>(result.num_tokens()),
              megatron::data::dtype_name(result.dtype()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return megatron::run_tool("merge_datasets", [&] { return run(argc, argv); });
}
