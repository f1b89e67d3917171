// The expected outputs of gpt_dataset_reference.py (an independent numpy implementation of
// spec 4), generated once into the build folder (keyed by the scripts' content), and helpers
// to compare our arrays with them exactly. Test-only.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "megatron/data/md5.h"
#include "megatron/data/npy.h"
#include "megatron/data/python_json.h"
#include "test_support.h"

namespace megatron::testing {

class ReferenceData {
 public:
  // The reference outputs, generated on first use into build/tests/unit/gpt_dataset_reference/
  // <md5 of the scripts, interpreter and golden prefix>, so test processes after the first reuse
  // them.
  static const ReferenceData& get() {
    static ReferenceData data;
    return data;
  }

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  std::string path(const std::string& relative) const { return (folder_ / relative).string(); }
  const nlohmann::ordered_json& manifest() const { return manifest_; }

  ReferenceData(const ReferenceData&) = delete;
  ReferenceData& operator=(const ReferenceData&) = delete;

 private:
  ReferenceData() {
    const std::filesystem::path script = std::string(testing::paths::kTestsSource) + "/unit/data/gpt_dataset_reference.py";
    const std::string key = data::md5_hex(
        read_file_bytes(script.string()) +
        read_file_bytes((script.parent_path() / "numpy_primitives_reference.py").string()) +
        testing::paths::kPython + golden_dataset_prefix());
    folder_ = std::filesystem::path(testing::paths::kTestsBuild) / "unit" / "gpt_dataset_reference" / key;
    if (!std::filesystem::is_regular_file(folder_ / "cases.json")) generate(script);
    if (error_.empty()) {
      manifest_ = nlohmann::ordered_json::parse(read_file_bytes(path("cases.json")));
      ok_ = true;
    }
  }

  // Generates under an exclusive lock, so concurrent test processes wait for one generator;
  // cases.json, written last by the script, marks a complete folder.
  void generate(const std::filesystem::path& script) {
    std::filesystem::create_directories(folder_.parent_path());
    const std::string lock_path = folder_.string() + ".lock";
    const int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock < 0 || ::flock(lock, LOCK_EX) != 0) {
      error_ = "cannot lock " + lock_path;
      if (lock >= 0) ::close(lock);
      return;
    }
    if (!std::filesystem::is_regular_file(folder_ / "cases.json")) {
      std::filesystem::remove_all(folder_);
      std::filesystem::create_directories(folder_);
      const std::string log = folder_.string() + ".log";
      const std::string command = std::string("\"") + testing::paths::kPython + "\" \"" + script.string() +
                                  "\" --golden \"" + golden_dataset_prefix() + "\" --out \"" +
                                  folder_.string() + "\" > \"" + log + "\" 2>&1";
      const int rc = std::system(command.c_str());
      if (rc != 0) {
        error_ = "the numpy reference failed (exit " + std::to_string(rc) + "): " + command + "\n" +
                 read_file_bytes(log) +
                 "\nSet -DMEGATRON_PYTHON=<a python with numpy> (scripts/setup.sh makes .venv).";
        std::filesystem::remove_all(folder_);
      }
      std::filesystem::remove(log);
    }
    ::flock(lock, LOCK_UN);
    ::close(lock);
  }

  std::filesystem::path folder_;
  nlohmann::ordered_json manifest_;
  bool ok_ = false;
  std::string error_;
};

// Fails the test (and returns) when the reference could not be generated.
#define MEGATRON_REQUIRE_REFERENCE()                                                         \
  const ::megatron::testing::ReferenceData& ref = ::megatron::testing::ReferenceData::get(); \
  ASSERT_TRUE(ref.ok()) << ref.error()

// A JSON value (parsed from Python's json.dump) as a PyJson: integers stay integers, floats
// floats, objects keep their key order.
inline data::PyJson to_pyjson(const nlohmann::ordered_json& value) {
  if (value.is_null()) return {};
  if (value.is_boolean()) return data::PyJson(value.get<bool>());
  if (value.is_number_unsigned()) return data::PyJson(value.get<std::uint64_t>());
  if (value.is_number_integer()) return data::PyJson(value.get<std::int64_t>());
  if (value.is_number_float()) return data::PyJson(value.get<double>());
  if (value.is_string()) return data::PyJson(value.get<std::string>());
  if (value.is_array()) {
    data::PyJson out{data::PyJson::List{}};
    for (const auto& item : value) out.push_back(to_pyjson(item));
    return out;
  }
  data::PyJson out = data::PyJson::dict();
  for (const auto& [key, item] : value.items()) out.set(key, to_pyjson(item));
  return out;
}

// Element-exact comparison of `actual` with the .npy file at `expected_path` (dtype, shape and
// every value); reports the first differing index.
inline void expect_same_array(const data::IndexArray& actual, const std::string& expected_path) {
  const data::NpyArray expected = data::NpyArray::map(expected_path);
  ASSERT_EQ(data::npy_dtype_name(actual.dtype()),
            std::string(data::npy_dtype_name(expected.dtype())))
      << expected_path;
  ASSERT_EQ(actual.shape(), expected.shape()) << expected_path;
  const data::IndexArray wanted = data::IndexArray::from_npy(data::NpyArray::map(expected_path));
  for (std::uint64_t i = 0; i < actual.size(); ++i) {
    if (actual.at(i) != wanted.at(i)) {
      FAIL() << expected_path << ": first difference at flat index " << i << ": got "
             << actual.at(i) << ", numpy has " << wanted.at(i);
    }
  }
}

}  // namespace megatron::testing
