// Opens the SentencePiece module once per process (see sentencepiece_library.h) and loads models
// through it. The module is looked for in the lib/ folder beside the executable's folder (build/lib
// for build/tools/*, so a build tree moved elsewhere or copied into an image still finds it), then
// where this build wrote it (MEGATRON_SENTENCEPIECE_MODULE, an absolute path CMake passes in).
#include <dlfcn.h>

#include <filesystem>
#include <mutex>

#include "megatron/core/check.h"
#include "sentencepiece_library.h"

namespace megatron::tokenizer {
namespace {

constexpr const char* kModuleName = "libmegatron_sentencepiece.so";

std::vector<std::string> module_candidates() {
  std::vector<std::string> paths;
  std::error_code error;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) paths.push_back((exe.parent_path().parent_path() / "lib" / kModuleName).string());
  paths.emplace_back(MEGATRON_SENTENCEPIECE_MODULE);
  return paths;
}

// The module's loader, or a failure naming every place tried and why each did not open.
SentencePieceLoadFn open_module() {
  std::string tried;
  for (const std::string& path : module_candidates()) {
    if (!std::filesystem::exists(path)) {
      tried += "\n  " + path + ": not there";
      continue;
    }
    // DEEPBIND: the module and libsentencepiece bind to their own protobuf copy before the
    // process's libprotobuf. LOCAL: none of their symbols become visible to later libraries.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (handle == nullptr) {
      tried += "\n  " + path + ": " + dlerror();
      continue;
    }
    auto* load = reinterpret_cast<SentencePieceLoadFn>(dlsym(handle, kSentencePieceLoadSymbol));
    if (load != nullptr) return load;  // the handle stays open for the life of the process
    tried += "\n  " + path + ": no symbol " + kSentencePieceLoadSymbol;
    dlclose(handle);
  }
  MEGATRON_FAIL("the SentencePiece tokenizer types need ", kModuleName,
                " (built with Debian's libsentencepiece-dev by scripts/setup.sh), and it could not be opened:", tried);
}

}  // namespace

std::unique_ptr<SentencePieceModel> load_sentencepiece_model(const std::string& bytes, const std::string& source) {
  static std::once_flag once;
  static SentencePieceLoadFn load = nullptr;
  static std::string open_error;
  std::call_once(once, [] {
    try {
      load = open_module();
    } catch (const std::exception& e) {
      open_error = e.what();
    }
  });
  MEGATRON_CHECK(load != nullptr, "--tokenizer-model ", source, ": ", open_error);
  std::string error;
  std::unique_ptr<SentencePieceModel> model(load(bytes.data(), bytes.size(), &error));
  MEGATRON_CHECK(model != nullptr, "--tokenizer-model ", source, " is not a SentencePiece model (",
                 error.find("ParseFromArray") != std::string::npos ? "the bytes are not a serialized ModelProto"
                                                                   : "SentencePiece: " + error,
                 "); the SentencePiece types read the .model file spm_train writes");
  return model;
}

}  // namespace megatron::tokenizer
