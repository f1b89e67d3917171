// Python's formats read without Python, against what Python wrote (pickle_reference.py): every
// pickled value at protocols 2-5 renders as pickle reduced it, torch.save's tensors and DCP
// folders (one chunk or several, in several files) read back as saved; and hostile bytes (every
// truncation, unknown opcodes, lengths past the end, a pickle that asks to run a shell command, a
// .distcp cut or overwritten) are refused naming the file, or read as inert placeholders, never
// run and never a crash.
#include "megatron/checkpoint/pickle.h"

#include <ATen/ATen.h>

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "megatron/checkpoint/dcp.h"
#include "megatron/checkpoint/torch_save.h"
#include "megatron/core/check.h"
#include "test_support.h"

namespace megatron::checkpoint {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

const fs::path& reference() { return testing::fixture_reference("pickle_reference", "pickle_reference"); }

TEST(Pickle, ReadsWhatPythonPickledAtEveryProtocol) {
  std::ifstream in(reference() / "cases.json");
  const nlohmann::json cases = nlohmann::json::parse(in);
  ASSERT_EQ(cases.size(), 36u);
  for (const auto& c : cases) {
    const std::string file = c.at("file").get<std::string>();
    SCOPED_TRACE(file);
    EXPECT_EQ(read_pickle(file_bytes(reference() / file), file)->repr(), c.at("repr").get<std::string>());
  }
}

TEST(Pickle, FindsNamespaceFieldsAndOrderedDictItems) {
  const PickleRef args = read_pickle(file_bytes(reference() / "namespace.p2.pkl"), "namespace");
  EXPECT_EQ(args->class_name(), "argparse.Namespace");
  ASSERT_NE(args->find("num_layers"), nullptr);
  EXPECT_EQ(args->find("num_layers")->integer, 2);
  EXPECT_EQ(args->find("tokenizer_type")->text, "GPT2BPETokenizer");
  EXPECT_EQ(args->find("missing"), nullptr);
  const PickleRef ordered = read_pickle(file_bytes(reference() / "ordered_dict.p4.pkl"), "ordered");
  EXPECT_EQ(ordered->class_name(), "collections.OrderedDict");
  ASSERT_NE(ordered->find("a"), nullptr);
  EXPECT_EQ(ordered->find("a")->class_name(), "torch.Size");
}

TEST(Pickle, EveryTruncationIsRefusedNamingTheFile) {
  for (const char* file : {"dcp_metadata.p2.pkl", "dcp_metadata.p4.pkl", "containers.p5.pkl", "big_ints.p2.pkl"}) {
    const std::string bytes = file_bytes(reference() / file);
    for (std::size_t n = 0; n + 1 < bytes.size(); ++n) {
      const std::string message = testing::error_of([&] { read_pickle(bytes.substr(0, n), "cut.pkl"); });
      ASSERT_NE(message.find("cut.pkl: not a readable pickle at byte "), std::string::npos) << file << " cut at " << n << ": " << message;
    }
  }
}

TEST(Pickle, HostileBytesAreRefusedOrInert) {
  const auto refusal = [](const std::string& bytes) { return testing::error_of([&] { read_pickle(bytes, "bad.pkl"); }); };
  // os.system("touch /tmp/pwned") as pickle protocol 2 writes it: read as a placeholder, not run.
  const std::string shell = "\x80\x02" "cposix\nsystem\nq\x00X\x10\x00\x00\x00touch /tmp/pwnedq\x01\x85q\x02Rq\x03."s;
  const PickleRef call = read_pickle(shell, "shell.pkl");
  EXPECT_EQ(call->kind, PickleValue::Kind::kObject);
  EXPECT_EQ(call->repr(), "posix.system('touch /tmp/pwned')");
  EXPECT_FALSE(fs::exists("/tmp/pwned"));
  testing::expect_contains(refusal("\x80\x02\xff."), {"bad.pkl: not a readable pickle at byte 2: opcode 0xff"});
  testing::expect_contains(refusal(std::string("\x80\x02X\xff\xff\xff\x7f" "abc.", 11)), {"a length of 2147483647 bytes, past the"});
  testing::expect_contains(refusal(std::string("\x80\x05\x97.", 4)), {"out-of-band buffers"});
  testing::expect_contains(refusal(std::string("\x80\x02\x82\x01.", 5)), {"EXT1 (the extension registry)"});
  testing::expect_contains(refusal(std::string("\x80\x02h\x05.", 5)), {"memo entry 5 was never stored"});
  testing::expect_contains(refusal(std::string("\x80\x02K\x01K\x02.", 7)), {"STOP with 2 values on the stack"});
  testing::expect_contains(refusal(std::string("\x80\x02" "a.", 4)), {"the stack is empty"});
  testing::expect_contains(refusal(std::string("\x80\x02K\x01)R.", 6)), {"calling a int, not a class or function"});
  // A list appended to itself (through the memo) is read; repr stops at its depth.
  const PickleRef loop = read_pickle("\x80\x02]q\x00h\x00" "a."s, "loop.pkl");
  EXPECT_EQ(loop->items.size(), 1u);
  EXPECT_EQ(loop->repr(3), "[[[...]]]");
}

// torch.save's archive against the values Python saved (tensors.json): every dtype, views of one
// storage, a transposed view, 0-d and empty tensors, a Parameter.
TEST(TorchSave, ReadsEveryTensorAsPythonSavedIt) {
  const TorchSaveArchive archive((reference() / "tensors.pt").string());
  std::ifstream in(reference() / "tensors.json");
  const nlohmann::json expected = nlohmann::json::parse(in);
  const PickleValue& root = archive.root();
  ASSERT_EQ(root.kind, PickleValue::Kind::kDict);
  ASSERT_EQ(root.entries.size(), expected.size());
  for (const auto& [name, want] : expected.items()) {
    SCOPED_TRACE(name);
    const PickleValue* value = root.find(name);
    ASSERT_NE(value, nullptr);
    ASSERT_TRUE(TorchSaveArchive::is_tensor(*value));
    const at::Tensor t = archive.tensor(*value);
    EXPECT_EQ(std::string(c10::toString(t.scalar_type())), want.at("dtype") == "float32"    ? "Float"
                                                           : want.at("dtype") == "bfloat16" ? "BFloat16"
                                                           : want.at("dtype") == "float16"  ? "Half"
                                                           : want.at("dtype") == "int64"    ? "Long"
                                                           : want.at("dtype") == "int32"    ? "Int"
                                                           : want.at("dtype") == "uint8"    ? "Byte"
                                                                                            : "Bool");
    EXPECT_EQ(t.sizes().vec(), want.at("shape").get<std::vector<std::int64_t>>());
    const at::Tensor values = at::tensor(want.at("values").get<std::vector<double>>(), at::kDouble);
    EXPECT_TRUE(at::equal(t.to(at::kDouble).flatten(), values)) << t;
  }
}

// Every block of every tensor (views of shared storages, offsets, strides included), read from its
// span of the storage alone, is that block of what Python saved; a block outside is refused.
TEST(TorchSave, ReadsBlocksFromTheirSpanAlone) {
  const TorchSaveArchive archive((reference() / "tensors.pt").string());
  std::ifstream in(reference() / "tensors.json");
  const nlohmann::json expected = nlohmann::json::parse(in);
  for (const auto& [name, want] : expected.items()) {
    SCOPED_TRACE(name);
    const PickleValue& value = *archive.root().find(name);
    const auto shape = want.at("shape").get<std::vector<std::int64_t>>();
    EXPECT_EQ(archive.info(value).sizes, shape);
    const at::Tensor whole =
        at::tensor(want.at("values").get<std::vector<double>>(), at::kDouble).reshape(shape);
    // Each dimension's every [begin, end): blocks that start, end and sit inside the tensor.
    for (std::size_t d = 0; d < shape.size(); ++d) {
      for (std::int64_t begin = 0; begin < shape[d]; ++begin) {
        for (std::int64_t end = begin + 1; end <= shape[d]; ++end) {
          std::vector<std::int64_t> offsets(shape.size(), 0), sizes = shape;
          offsets[d] = begin;
          sizes[d] = end - begin;
          const at::Tensor got = archive.block(value, offsets, sizes);
          EXPECT_TRUE(at::equal(got.to(at::kDouble), whole.narrow(static_cast<std::int64_t>(d), begin, end - begin)))
              << d << " [" << begin << ", " << end << ")";
        }
      }
    }
    if (!shape.empty()) {
      std::vector<std::int64_t> offsets(shape.size(), 0), sizes = shape;
      offsets[0] = 1;
      testing::expect_contains(testing::error_of([&] { archive.block(value, offsets, sizes); }), {"is outside the tensor"});
    }
  }
}

TEST(TorchSave, HostileArchivesAreRefusedNamingTheFile) {
  testing::TempDir dir("torch_save");
  const std::string good = file_bytes(reference() / "tensors.pt");
  const auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir.path() / name, std::ios::binary) << bytes;
    return (dir.path() / name).string();
  };
  // Cut anywhere: refused, never a crash.
  for (const std::size_t n : {std::size_t{0}, std::size_t{10}, good.size() / 2, good.size() - 10}) {
    const std::string path = write("cut.pt", good.substr(0, n));
    const std::string message = testing::error_of([&] {
      const TorchSaveArchive archive(path);
      for (const auto& [k, v] : archive.root().entries) {
        archive.tensor(*v);
        archive.block(*v, std::vector<std::int64_t>(archive.info(*v).sizes.size(), 0), archive.info(*v).sizes);
      }
    });
    EXPECT_NE(message.find(path), std::string::npos) << n << ": " << message;
  }
  // A byte range past the end of the file.
  testing::expect_contains(testing::error_of([&] { TorchSaveArchive((reference() / "tensors.pt").string(), 100, good.size()); }),
                           {"the range ends past the end of the file"});
  // An item of a file at an offset, as a .distcp holds them: the same tensors.
  const std::string path = write("padded.bin", std::string(1000, 'x') + good + std::string(77, 'y'));
  const TorchSaveArchive inner(path, 1000, good.size());
  EXPECT_TRUE(at::equal(inner.tensor(*inner.root().find("int64")), at::tensor(std::vector<std::int64_t>{1, -2, std::int64_t{1} << 40, 7}).reshape({2, 2})));
  EXPECT_NE(inner.where().find("bytes [1000, "), std::string::npos);
}

// DCP folders as torch.distributed.checkpoint writes them: one chunk per tensor (dcp.save in one
// process) and two chunks in two files (as sharded ranks write them); any block reads from the
// chunks it overlaps.
TEST(Dcp, ReadsTensorsAndBytesAsTorchWroteThem) {
  std::ifstream in(reference() / "dcp.json");
  const nlohmann::json want = nlohmann::json::parse(in);
  const at::Tensor w = at::tensor(want.at("w").get<std::vector<double>>(), at::kDouble).reshape({6, 4});
  const at::Tensor v = at::tensor(want.at("v").get<std::vector<double>>(), at::kDouble).reshape({3, 5});
  for (const char* folder : {"dcp_plain", "dcp_chunks"}) {
    SCOPED_TRACE(folder);
    const DcpCheckpoint ckpt((reference() / folder).string());
    ASSERT_EQ(ckpt.tensors().size(), 2u);
    EXPECT_EQ(ckpt.tensors().at("w").size, (std::vector<std::int64_t>{6, 4}));
    EXPECT_EQ(ckpt.tensors().at("v").dtype, at::kBFloat16);
    EXPECT_EQ(ckpt.tensors().at("w").chunks.size(), std::string(folder) == "dcp_chunks" ? 2u : 1u);
    EXPECT_TRUE(at::equal(ckpt.read("w").to(at::kDouble), w));
    EXPECT_TRUE(at::equal(ckpt.read("v").to(at::kDouble), v));
    // Blocks across the chunk boundaries.
    EXPECT_TRUE(at::equal(ckpt.read("w", {3, 1}, {2, 3}).to(at::kDouble), w.narrow(0, 3, 2).narrow(1, 1, 3)));
    EXPECT_TRUE(at::equal(ckpt.read("v", {1, 1}, {2, 3}).to(at::kDouble), v.narrow(0, 1, 2).narrow(1, 1, 3)));
  }
  const DcpCheckpoint plain((reference() / "dcp_plain").string());
  const auto blob = want.at("blob").get<std::vector<int>>();
  EXPECT_EQ(plain.read_bytes("blob"), std::string(blob.begin(), blob.end()));
}

TEST(Dcp, BrokenFoldersAreRefusedNamingTheFile) {
  testing::TempDir dir("dcp");
  const auto copy = [&](const std::string& name) {
    fs::copy(reference() / "dcp_chunks", dir.path() / name, fs::copy_options::recursive);
    return dir.path() / name;
  };
  // A .distcp cut short: the metadata's ranges reach past it.
  const fs::path cut = copy("cut");
  fs::resize_file(cut / "__1_0.distcp", fs::file_size(cut / "__1_0.distcp") / 2);
  testing::expect_contains(testing::error_of([&] { DcpCheckpoint{cut.string()}; }), {"__1_0.distcp, which has"});
  // Bytes of a chunk overwritten: its archive is refused naming the file and the range.
  const fs::path garbled = copy("garbled");
  {
    std::fstream f(garbled / "__0_0.distcp", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f << std::string(64, 'z');
  }
  const DcpCheckpoint bad(garbled.string());
  testing::expect_contains(testing::error_of([&] { bad.read("w"); }), {"__0_0.distcp bytes [0, "});
  // A .metadata that names a class DCP does not have, or is not a pickle.
  const fs::path other = copy("other");
  std::ofstream(other / ".metadata", std::ios::binary) << "\x80\x02" "cos\nsystem\nq\x00)Rq\x01."s;
  testing::expect_contains(testing::error_of([&] { DcpCheckpoint{other.string()}; }), {"is a os.system object, not a Metadata"});
  std::ofstream(other / ".metadata", std::ios::binary) << "not a pickle";
  testing::expect_contains(testing::error_of([&] { DcpCheckpoint{other.string()}; }), {".metadata: not a readable pickle"});
  testing::expect_contains(testing::error_of([&] { DcpCheckpoint{(dir.path() / "none").string()}; }), {"has no .metadata"});
}

}  // namespace
}  // namespace megatron::checkpoint
