// Index cache files: load (map) and crash-safe group save (see index_cache.h).
#include "megatron/data/index_cache.h"

#include <filesystem>
#include <memory>
#include <system_error>

#include "megatron/core/check.h"
#include "megatron/core/file_io.h"

namespace megatron::data {

IndexCache::IndexCache(std::string folder, std::string base, std::vector<std::string> array_names)
    : folder_(std::move(folder)), base_(std::move(base)), array_names_(std::move(array_names)) {}

std::string IndexCache::path(const std::string& affix) const {
  return (std::filesystem::path(folder_) / (base_ + "-" + affix)).string();
}

bool IndexCache::complete() const {
  std::error_code error;
  if (!std::filesystem::is_regular_file(description_path(), error)) return false;
  for (std::size_t i = 0; i < array_names_.size(); ++i) {
    if (!std::filesystem::is_regular_file(array_path(i), error)) return false;
  }
  return true;
}

std::optional<std::vector<IndexArray>> IndexCache::load(const std::string& description,
                                                        std::string& problem) const {
  try {
    const std::string on_disk = read_text_file(description_path(), "dataset cache description");
    if (on_disk != description) {
      problem = description_path() + " does not describe this dataset";
      return std::nullopt;
    }
    std::vector<IndexArray> arrays;
    for (std::size_t i = 0; i < array_names_.size(); ++i) {
      arrays.push_back(IndexArray::from_npy(NpyArray::map(array_path(i))));
    }
    return arrays;
  } catch (const Error& e) {
    problem = e.what();
    return std::nullopt;
  }
}

void IndexCache::save(const std::string& description, const std::vector<IndexArray>& arrays) const {
  MEGATRON_ASSERT(arrays.size() == array_names_.size());
  std::error_code error;
  std::filesystem::create_directories(folder_, error);
  MEGATRON_CHECK(!error, "cannot create the dataset cache folder ", folder_, " (", error.message(),
                 "); pass a writable folder with --data-cache-path");
  check_writable_parent(description_path(), "dataset cache");
  std::vector<std::unique_ptr<AtomicFile>> files;
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    files.push_back(std::make_unique<AtomicFile>(array_path(i)));
    arrays[i].write(*files.back());
  }
  files.push_back(std::make_unique<AtomicFile>(description_path()));
  files.back()->write(description.data(), description.size());
  for (auto& file : files) file->sync();
  for (auto& file : files) file->publish();  // the description, last, completes the cache
}

}  // namespace megatron::data
