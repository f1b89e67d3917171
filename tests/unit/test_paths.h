// Absolute paths the tests need (test data, tokenizer files, Python, the tests' sources and the
// build's test folder). CMake generates their definitions into one small file per build
// (build/tests/test_paths.cpp), so no test source carries a clone-specific path and every other
// test object is the same in every clone: ccache shares them between clones.
#pragma once

namespace megatron::testing::paths {

extern const char* const kTestDataDir;   // build/tests/data: tests/data/, decompressed
extern const char* const kGpt2Dir;       // tokenizers/gpt2
extern const char* const kPython;        // Python with numpy and torch (the .venv setup makes)
extern const char* const kTestsSource;   // the repository's tests/ folder
extern const char* const kTestsBuild;    // build/tests

}  // namespace megatron::testing::paths
