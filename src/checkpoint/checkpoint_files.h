// The files of one checkpoint shard folder and their checks (private to src/checkpoint): shared by
// the save (checkpoint.cpp) and the load (checkpoint_load.cpp).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "megatron/checkpoint/safetensors.h"

namespace megatron::checkpoint::detail {

constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kOptimizerFile = "optimizer.safetensors";
constexpr const char* kRngFile = "rng.safetensors";
constexpr const char* kMetaFile = "meta.json";

// A file's size and CRC-32 against meta.json's record of it; throws megatron::Error naming the file
// as truncated or corrupt.
void check_digest(const std::string& path, const FileDigest& d, const nlohmann::json& expected);
// The same for a file on disk, which must exist (missing: the checkpoint is partial).
void verify(const std::string& path, const nlohmann::json& expected);

}  // namespace megatron::checkpoint::detail
