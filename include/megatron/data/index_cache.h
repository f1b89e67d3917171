// A group of index arrays cached on disk the way Megatron caches them (spec 4.8):
// `<folder>/<md5>-<Class>-<split>-description.txt` and one `...-<name>.npy` per array. Saving
// writes every file under a temporary name, syncs them all, then renames the arrays into place
// and the description last; a cache counts as present only when all files exist, so a crash at
// any moment leaves either a complete cache or a miss (rebuilt), never a half-read one.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "megatron/data/npy.h"

namespace megatron::data {

class IndexCache {
 public:
  // `base` is "<md5>-<Class>-<split>" (the name before each file's affix).
  IndexCache(std::string folder, std::string base, std::vector<std::string> array_names);

  const std::string& folder() const { return folder_; }
  // "<folder>/<base>-<affix>", e.g. affix "description.txt" or "sample_index.npy".
  std::string path(const std::string& affix) const;
  std::string description_path() const { return path("description.txt"); }
  std::string array_path(std::size_t i) const { return path(array_names_[i] + ".npy"); }

  // Megatron's cache-hit test: the description and every array file exist.
  bool complete() const;

  // Maps every array. Returns nullopt and sets `problem` when the description on disk is not
  // `description` or an array file is not a readable .npy.
  std::optional<std::vector<IndexArray>> load(const std::string& description,
                                              std::string& problem) const;

  // Creates the folder and writes all files (arrays first, description last), atomically.
  // Throws megatron::Error naming the folder when it cannot be created or written.
  void save(const std::string& description, const std::vector<IndexArray>& arrays) const;

 private:
  std::string folder_;
  std::string base_;
  std::vector<std::string> array_names_;
};

}  // namespace megatron::data
