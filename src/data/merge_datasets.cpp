// merge_datasets(): Megatron's tools/merge_datasets.py (spec 2.5). Every X.bin/X.idx pair in a
// folder, prefixes in sorted order, appended into one dataset with the first one's dtype.
// Not recursive; multimodal datasets (a "modes" array in the .idx) are not supported.
#include <algorithm>
#include <filesystem>
#include <map>

#include "megatron/core/check.h"
#include "megatron/data/indexed_dataset.h"

namespace megatron::data {
namespace {

namespace fs = std::filesystem;

struct Pair {
  bool has_idx = false;
  bool has_bin = false;
};

// Prefix -> which of its two files exist. Files with other extensions are skipped, unlike
// Megatron, which demands a partner for every file: a README, a checksum list or one of our own
// `X.bin.tmp.<pid>.<n>` leftovers in the folder should not stop a merge, and no Megatron dataset
// is ever named anything but .bin/.idx. Sub-folders are skipped as in Megatron.
std::map<std::string, Pair> scan_folder(const std::string& input_dir) {
  std::error_code ec;
  MEGATRON_CHECK(fs::exists(input_dir, ec), "input folder ", input_dir, " does not exist");
  MEGATRON_CHECK(fs::is_directory(input_dir, ec), "input ", input_dir,
                 " is not a folder; --input takes the folder holding the .bin/.idx pairs");
  std::map<std::string, Pair> pairs;
  fs::directory_iterator it(input_dir, ec);
  if (ec) throw_error(str_cat("cannot list input folder ", input_dir, ": ", ec.message()));
  for (const fs::directory_entry& entry : it) {
    if (!entry.is_regular_file(ec)) continue;
    const fs::path& path = entry.path();
    const std::string ext = path.extension().string();
    const std::string prefix = (path.parent_path() / path.stem()).string();
    if (ext == ".idx") pairs[prefix].has_idx = true;
    if (ext == ".bin") pairs[prefix].has_bin = true;
  }
  return pairs;
}

}  // namespace

std::vector<std::string> merge_datasets(const std::string& input_dir,
                                        const std::string& output_prefix) {
  const std::map<std::string, Pair> pairs = scan_folder(input_dir);
  check_writable_parent(index_path(output_prefix), "--output-prefix");

  // std::map iterates in byte order, which for UTF-8 names equals Python's sorted() on str.
  std::vector<std::string> prefixes;
  for (const auto& [prefix, pair] : pairs) {
    MEGATRON_CHECK(pair.has_bin, index_path(prefix), " has no matching ", data_path(prefix),
                   "; every dataset in ", input_dir, " needs both files");
    MEGATRON_CHECK(pair.has_idx, data_path(prefix), " has no matching ", index_path(prefix),
                   "; every dataset in ", input_dir, " needs both files");
    prefixes.push_back(prefix);
  }
  MEGATRON_CHECK(!prefixes.empty(), "no .bin/.idx dataset pairs found in ", input_dir);

  std::error_code ec;
  const fs::path output = fs::weakly_canonical(index_path(output_prefix), ec);
  for (const std::string& prefix : prefixes) {
    MEGATRON_CHECK(ec || fs::weakly_canonical(index_path(prefix), ec) != output,
                   "the output ", output_prefix, " is also an input (", index_path(prefix),
                   "); choose an --output-prefix outside ", input_dir, " or remove the old output");
  }

  std::unique_ptr<IndexedDatasetWriter> writer;
  std::string first;
  for (const std::string& prefix : prefixes) {
    const IndexedDataset dataset(prefix);
    if (!writer) {
      writer = std::make_unique<IndexedDatasetWriter>(output_prefix, dataset.dtype());
      first = prefix;
    }
    MEGATRON_CHECK(dataset.dtype() == writer->dtype(), "dtype mismatch: ", index_path(prefix),
                   " holds ", dtype_name(dataset.dtype()), " tokens but ", index_path(first),
                   " (the first dataset, which sets the output dtype) holds ",
                   dtype_name(writer->dtype()));
    writer->add_index(dataset);
  }
  writer->finalize();
  return prefixes;
}

}  // namespace megatron::data
