// The writers of Python's formats (pickle, torch.save, DCP) against the readers that Python's own
// files check (test_python_formats.cpp): every value Python pickled is written again and reads
// back the same; tensors of every dtype and DCP folders in several chunks and files come back as
// written; inconsistent item sets are refused. (That torch, Megatron-Core and transformers load
// what is written here is the e2e test megatron_checkpoints.sh.)
#include <ATen/ATen.h>

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "megatron/checkpoint/dcp.h"
#include "megatron/checkpoint/pickle.h"
#include "megatron/checkpoint/torch_save.h"
#include "megatron/core/check.h"
#include "test_support.h"

namespace megatron::checkpoint {
namespace {

namespace fs = std::filesystem;

const fs::path& reference() { return testing::fixture_reference("pickle_reference", "pickle_reference"); }

TEST(PickleWriter, WritesEveryValuePythonPickledSoThatItReadsBackTheSame) {
  std::ifstream in(reference() / "cases.json");
  const nlohmann::json cases = nlohmann::json::parse(in);
  ASSERT_FALSE(cases.empty());
  for (const auto& c : cases) {
    const std::string file = c.at("file").get<std::string>();
    SCOPED_TRACE(file);
    const PickleRef value = read_pickle(testing::read_file_bytes((reference() / file).string()), file);
    const std::string written = write_pickle(*value);
    EXPECT_EQ(written.substr(0, 2), "\x80\x02");  // protocol 2, torch.save's
    EXPECT_EQ(read_pickle(written, "written")->repr(), c.at("repr").get<std::string>());
  }
}

TEST(PickleWriter, WritesIntegersFloatsAndBytesAtEverySize) {
  std::vector<PickleRef> items;
  for (const std::int64_t i : {std::int64_t{0}, std::int64_t{255}, std::int64_t{256}, std::int64_t{65535},
                               std::int64_t{65536}, std::int64_t{-1}, std::int64_t{INT32_MIN}, std::int64_t{INT32_MAX},
                               std::int64_t{1} << 40, -(std::int64_t{1} << 40), INT64_MIN, INT64_MAX}) {
    items.push_back(py::integer(i));
  }
  items.push_back(py::real(-1.5e-300));
  items.push_back(py::bytes(std::string("\x00\x7f\x80\xff", 4)));
  items.push_back(py::str("h\xc3\xa9llo"));
  const PickleRef back = read_pickle(write_pickle(*py::tuple(items)), "written");
  EXPECT_EQ(back->repr(), "(0, 255, 256, 65535, 65536, -1, -2147483648, 2147483647, 1099511627776, -1099511627776, "
                          "-9223372036854775808, 9223372036854775807, -1.5e-300, b'\\x00\\x7f\\x80\\xff', 'h\xc3\xa9llo')");
}

TEST(PickleWriter, RefusesAValueThatContainsItself) {
  PickleRef list = py::list({});
  list->items.push_back(list);
  EXPECT_THROW(write_pickle(*list), Error);
  list->items.clear();  // break the cycle, so that the list is freed
}

TEST(TorchSaveWriter, WritesTensorsOfEveryDtypeThatReadBackAsWritten) {
  testing::TempDir dir("torch_save_writer");
  TorchSaveWriter writer;
  std::vector<at::Tensor> tensors;
  std::vector<std::pair<PickleRef, PickleRef>> entries;
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf, at::kDouble, at::kLong, at::kInt, at::kByte,
                                     at::kBool}) {
    tensors.push_back(at::arange(24, at::kDouble).reshape({2, 3, 4}).to(dtype));
    entries.emplace_back(py::str(at::toString(dtype)), writer.tensor(tensors.back()));
  }
  tensors.push_back(at::arange(12, at::kFloat).reshape({3, 4}).t());  // a view: its elements, contiguous
  entries.emplace_back(py::str("view"), writer.tensor(tensors.back()));
  tensors.push_back(at::empty({0, 5}));
  entries.emplace_back(py::str("empty"), writer.tensor(tensors.back()));
  const std::string path = (dir.path() / "t.pt").string();
  {
    std::ofstream out(path, std::ios::binary);
    out << writer.bytes(*py::dict(entries));
  }
  const TorchSaveArchive archive(path);
  ASSERT_EQ(archive.root().entries.size(), tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    SCOPED_TRACE(archive.root().entries[i].first->text);
    const at::Tensor back = archive.tensor(*archive.root().entries[i].second);
    EXPECT_EQ(back.scalar_type(), tensors[i].scalar_type());
    EXPECT_TRUE(at::equal(back, tensors[i].contiguous()));
  }
}

TEST(DcpWriter, WritesChunksInSeveralFilesThatReadBackWhole) {
  testing::TempDir dir("dcp_writer");
  const at::Tensor w = at::randn({6, 4}), v = at::randn({3, 5}).to(at::kBFloat16);
  std::vector<DcpEntry> entries;
  for (int r = 0; r < 2; ++r) {
    DcpFileWriter file(dir.path().string(), "__" + std::to_string(r) + "_0.distcp");
    file.add_tensor("w", {6, 4}, {3 * r, 0}, w.narrow(0, 3 * r, 3));
    if (r == 1) {
      file.add_tensor("v", {3, 5}, {0, 0}, v);
      file.add_bytes("blob", std::string("\x00\x01\x02", 3));
    }
    auto written = file.commit();
    entries.insert(entries.end(), written.begin(), written.end());
  }
  // The records survive their JSON trip (the ranks' items reach rank 0 that way).
  for (auto& e : entries) e = DcpEntry::from_json(nlohmann::json::parse(e.to_json().dump()));
  write_dcp_metadata(dir.path().string(), entries);
  const DcpCheckpoint ckpt(dir.path().string());
  EXPECT_EQ(ckpt.tensors().at("w").chunks.size(), 2u);
  EXPECT_TRUE(at::equal(ckpt.read("w"), w));
  EXPECT_TRUE(at::equal(ckpt.read("w", {2, 1}, {2, 2}), w.narrow(0, 2, 2).narrow(1, 1, 2)));
  EXPECT_TRUE(at::equal(ckpt.read("v"), v));
  EXPECT_EQ(ckpt.read_bytes("blob"), std::string("\x00\x01\x02", 3));

  // A chunk twice, or of another shape than its tensor's, is refused naming the tensor.
  auto twice = entries;
  twice.push_back(entries.front());
  testing::expect_contains(testing::error_of([&] { write_dcp_metadata(dir.path().string(), twice); }),
                           {"w at [0, 0] is written twice"});
  auto other = entries;
  other.back().is_bytes = false;
  other.back().key = "w";
  other.back().size = {7, 4};
  testing::expect_contains(testing::error_of([&] { write_dcp_metadata(dir.path().string(), other); }),
                           {"the writers disagree on w"});
  DcpFileWriter outside(dir.path().string(), "__9_0.distcp");
  testing::expect_contains(testing::error_of([&] { outside.add_tensor("w", {6, 4}, {4, 0}, w.narrow(0, 0, 3)); }),
                           {"lies outside its global shape [6, 4]"});
}

}  // namespace
}  // namespace megatron::checkpoint
