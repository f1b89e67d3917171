// Helpers shared by the unit tests: a per-test temporary folder removed on scope exit, whole-file
// reads, the test data's paths (tests/data, tokenizers/gpt2), and matchers for megatron::Error
// messages. Test-only; a TempDir must be made while a test runs (its name comes from the test).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "megatron/core/check.h"
#include "test_paths.h"

namespace megatron::testing {

// A fresh folder under the system temporary folder, named <prefix>_<pid>_<suite>.<test>_<n>, and
// removed with everything in it when the TempDir goes out of scope.
class TempDir {
 public:
  explicit TempDir(std::string_view prefix = "megatron") {
    static int counter = 0;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string test = info == nullptr ? "no_test"
                                       : std::string(info->test_suite_name()) + "." + info->name();
    std::replace(test.begin(), test.end(), '/', '_');  // parameterised names hold '/'
    path_ = std::filesystem::temp_directory_path() /
            (std::string(prefix) + "_" + std::to_string(::getpid()) + "_" + test + "_" +
             std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // The path of `name` (which may hold '/') inside the folder, as a string.
  std::string operator/(std::string_view name) const { return (path_ / name).string(); }

  // Writes `bytes` to `name` inside the folder, replacing any such file; returns its path.
  std::string write(std::string_view name, std::string_view bytes) const {
    const std::string path = *this / name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(out.good()) << "cannot write " << path;
    return path;
  }

  // The names of the entries directly in the folder, sorted.
  std::vector<std::string> files() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(path_)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::filesystem::path path_;
};

// The whole content of the file at `path` ("" when it cannot be opened).
inline std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The test data, all inside the repository: the folder the build decompresses tests/data/ into,
// and GPT-2's tokenizer files in tokenizers/gpt2/.
inline std::string test_data_dir() { return paths::kTestDataDir; }
inline std::string gpt2_vocab_file() { return std::string(paths::kGpt2Dir) + "/gpt2-vocab.json"; }
inline std::string gpt2_merges_file() { return std::string(paths::kGpt2Dir) + "/gpt2-merges.txt"; }

// The corpus Megatron preprocessed into the golden dataset (8 MB of jsonl, 525 documents).
inline std::string golden_corpus() { return test_data_dir() + "/corpus.jsonl"; }

// The prefix of the Megatron-made golden dataset (corpus_text_document.{bin,idx}).
inline std::string golden_dataset_prefix() { return test_data_dir() + "/corpus_text_document"; }

// The folder <build>/tests/unit/<name> that the CTest fixture test `fixture` (tests/unit/
// CMakeLists.txt) fills by running tests/unit/tokenizer/<name>.py once before the tests that
// read it; a test failure saying how to make it when it holds no "done" marker.
inline const std::filesystem::path& fixture_reference(const std::string& name, const std::string& fixture) {
  static std::map<std::string, std::filesystem::path> folders;
  auto it = folders.find(name);
  if (it == folders.end()) {
    const std::filesystem::path out = std::filesystem::path(paths::kTestsBuild) / "unit" / name;
    if (!std::filesystem::exists(out / "done")) {
      ADD_FAILURE() << out << " has no reference: run the tests through ctest (its fixture " << fixture
                    << " runs tests/unit/<area>/" << name << ".py first), or run that script with --out " << out;
    }
    it = folders.emplace(name, out).first;
  }
  return it->second;
}

// The message of the megatron::Error that `fn()` throws; a test failure and "" if it throws none.
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a megatron::Error";
  return "";
}

// Expects every one of `parts` somewhere in `text`.
inline void expect_contains(const std::string& text, std::initializer_list<std::string> parts) {
  for (const std::string& part : parts) {
    EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
  }
}

}  // namespace megatron::testing
