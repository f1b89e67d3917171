// The optimizer over the DP buffers in one process: the same parameters as a dense per-tensor AdamW
// in double precision (reference_adamw.h), weight decay only on 2-D non-bias parameters, its checkpoint
// pieces (names, offsets, a resume that continues bit for bit, pieces cut differently as another
// DP size would cut them) and the errors of incomplete or foreign state.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "megatron/core/check.h"
#include "megatron/optim/adamw.h"
#include "optim/reference_adamw.h"
#include "megatron/optim/optimizer.h"
#include "megatron/parallel/single_process_context.h"
#include "parallel/ddp_test_model.h"
#include "tensor_expect.h"

namespace megatron::optim {
namespace {

using megatron::testing::expect_close;
using megatron::testing::Tolerance;

using parallel::DataParallelBuffers;
using parallel::DataParallelConfig;
using testing::TinyModel;

constexpr double kLr = 0.01, kWd = 0.1;

// A model, its buffer and optimizer in one piece.
struct Trained {
  explicit Trained(std::uint64_t seed, const DataParallelConfig& config = {}) : model(TinyModel::make(seed)) {
    buffer =
        std::make_unique<DataParallelBuffers>(model.params, model.layouts, parallel::single_process_context(), config);
    optimizer = std::make_unique<Optimizer>(*buffer, buffer->context(), AdamWConfig{});
  }
  // One iteration on micro-batches from `batch`; returns the grad norm.
  double step(int iteration, double clip) {
    buffer->zero_grad();
    for (int mb = 0; mb < 2; ++mb) {
      buffer->set_last_microbatch(mb == 1);
      const auto [x, t] = TinyModel::batch(static_cast<std::uint64_t>(2 * iteration + mb));
      model.loss(x, t).backward();
    }
    buffer->finish_grad_sync();
    return optimizer->step(kLr, kWd, clip).grad_norm;
  }
  TinyModel model;
  std::unique_ptr<DataParallelBuffers> buffer;
  std::unique_ptr<Optimizer> optimizer;
};

void expect_same_params(const TinyModel& a, const TinyModel& b, double tolerance = 0.0) {
  for (std::size_t i = 0; i < a.params.size(); ++i) {
    const at::Tensor& x = a.params[i].second;
    const at::Tensor& y = b.params[i].second;
    if (tolerance == 0.0) {
      megatron::testing::expect_equal(x, y, a.params[i].first);
    } else {
      expect_close(x, y, Tolerance::elementwise(tolerance, tolerance), a.params[i].first);
    }
  }
}

TEST(Optimizer, MatchesPerTensorAdamWWithClipping) {
  for (const bool overlap : {false, true}) {
    DataParallelConfig config;
    config.overlap_grad_reduce = overlap;
    config.bucket_size = 50;
    Trained flat(7, config);
    TinyModel dense = TinyModel::make(7);
    testing::ReferenceAdamW reference(dense.params, AdamWConfig{});
    for (int it = 0; it < 5; ++it) {
      const double norm = flat.step(it, 2.0);
      reference.zero_grad();
      for (int mb = 0; mb < 2; ++mb) {
        const auto [x, t] = TinyModel::batch(static_cast<std::uint64_t>(2 * it + mb));
        dense.loss(x, t).backward();
      }
      const double dense_norm = reference.clip_grad_norm(2.0);
      EXPECT_NEAR(norm, dense_norm, 1e-6 * dense_norm) << "iteration " << it;
      EXPECT_GT(norm, 2.0);  // clipping is active
      reference.step(kLr, kWd);
      expect_same_params(flat.model, dense, 1e-6);
    }
  }
}

TEST(Optimizer, WeightDecayOnlyOnMatrices) {
  Trained t(8);
  const TinyModel before = t.model.clone();
  t.buffer->zero_grad();
  t.optimizer->step(0.5, 0.2, 0.0);  // zero gradients: only the decay moves parameters
  for (std::size_t i = 0; i < t.model.params.size(); ++i) {
    const bool decays = t.model.params[i].second.dim() == 2;
    const at::Tensor want =
        decays ? before.params[i].second * static_cast<float>(1.0 - 0.5 * 0.2) : before.params[i].second;
    EXPECT_TRUE(at::equal(t.model.params[i].second, want)) << t.model.params[i].first;
  }
}

TEST(Optimizer, StatePiecesNameParameterKeyAndOffset) {
  Trained t(9);
  t.step(0, 1.0);
  const NamedTensors state = t.optimizer->state();
  ASSERT_EQ(state.size(), 3 * t.model.params.size());
  std::vector<std::string> names;
  for (const auto& [name, tensor] : state) names.push_back(name);
  EXPECT_EQ(names[0], "layers.0.fc2.bias/param/0");  // buffer order: the last parameter first
  EXPECT_EQ(names[1], "layers.0.fc2.bias/exp_avg/0");
  EXPECT_EQ(names[2], "layers.0.fc2.bias/exp_avg_sq/0");
  EXPECT_TRUE(at::equal(state[0].second, t.model.params[4].second.flatten()));
  EXPECT_EQ(state[3].first, "layers.0.fc2.weight/param/0");
  EXPECT_EQ(state[3].second.numel(), TinyModel::kOut * TinyModel::kHidden);
  EXPECT_EQ(t.optimizer->step_count(), 1);
  EXPECT_EQ(t.optimizer->state_numel(), 3 * t.buffer->layout().numel);
}

// Cuts every piece into `parts` uneven pieces, as a run with more DP ranks would have saved it.
NamedTensors recut(const NamedTensors& state, int parts) {
  NamedTensors out;
  for (const auto& [name, tensor] : state) {
    const std::string base = name.substr(0, name.rfind('/') + 1);
    const std::int64_t offset = std::stoll(name.substr(name.rfind('/') + 1));
    std::int64_t begin = 0;
    for (int k = 0; k < parts; ++k) {
      const std::int64_t end = k + 1 == parts ? tensor.numel() : std::min(tensor.numel(), begin + 1 + 2 * k);
      if (end > begin)
        out.emplace_back(base + std::to_string(offset + begin), tensor.narrow(0, begin, end - begin).clone());
      begin = end;
    }
  }
  std::reverse(out.begin(), out.end());  // order does not matter
  return out;
}

TEST(Optimizer, ResumesFromPiecesCutAnyWay) {
  Trained straight(10);
  for (int it = 0; it < 3; ++it) straight.step(it, 1.0);
  NamedTensors saved;
  for (const auto& [name, tensor] : straight.optimizer->state()) saved.emplace_back(name, tensor.clone());
  const TinyModel saved_model = straight.model.clone();
  for (int it = 3; it < 6; ++it) straight.step(it, 1.0);

  for (int parts : {1, 3}) {
    for (const bool distributed : {false, true}) {
      DataParallelConfig config;
      config.use_distributed_optimizer = distributed;
      config.overlap_grad_reduce = distributed;
      config.bucket_size = 70;
      Trained resumed(99, config);  // other initial values: everything must come from the state
      NamedTensors pieces = recut(saved, parts);
      if (parts == 1) {  // a plain run's pieces from two DP ranks: every piece twice
        const NamedTensors copy = pieces;
        pieces.insert(pieces.end(), copy.begin(), copy.end());
      }
      SCOPED_TRACE(::testing::Message() << parts << " parts, distributed " << distributed);
      resumed.optimizer->load_state(pieces, 3);
      expect_same_params(resumed.model, saved_model);
      for (int it = 3; it < 6; ++it) resumed.step(it, 1.0);
      expect_same_params(resumed.model, straight.model);
      EXPECT_EQ(resumed.optimizer->step_count(), 6);
    }
  }
}

std::string load_error(Optimizer& optimizer, const NamedTensors& pieces) {
  try {
    optimizer.load_state(pieces, 1);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Optimizer, LoadStateNamesWhatIsWrong) {
  Trained t(11);
  const NamedTensors state = t.optimizer->state();
  NamedTensors missing = recut(state, 3);
  missing.erase(std::find_if(missing.begin(), missing.end(),
                             [](const auto& p) { return p.first == "layers.0.fc1.weight/exp_avg/1"; }));
  EXPECT_NE(load_error(*t.optimizer, missing).find("'exp_avg' of layers.0.fc1.weight: elements [1, 4) are missing"),
            std::string::npos)
      << load_error(*t.optimizer, missing);

  NamedTensors overlap = state;
  overlap.emplace_back("layers.0.norm.weight/exp_avg_sq/2", at::zeros({3}));
  EXPECT_NE(load_error(*t.optimizer, overlap).find("layers.0.norm.weight: elements [2, 5) are in two pieces"),
            std::string::npos)
      << load_error(*t.optimizer, overlap);

  NamedTensors foreign = state;
  foreign.emplace_back("layers.1.fc1.weight/param/0", at::zeros({3}));
  foreign.emplace_back("layers.0.fc1.bias/momentum/0", at::zeros({3}));
  foreign.emplace_back("layers.0.fc1.bias.exp_avg", at::zeros({3}));
  foreign.emplace_back("layers.0.fc1.bias/param/12", at::zeros({3}));
  const std::string message = load_error(*t.optimizer, foreign);
  EXPECT_NE(message.find("'layers.1.fc1.weight/param/0' names no parameter of this model"), std::string::npos)
      << message;
  EXPECT_NE(message.find("'layers.0.fc1.bias/momentum/0' names an unknown state (states: param, exp_avg, exp_avg_sq)"), std::string::npos) << message;
  EXPECT_NE(message.find("'layers.0.fc1.bias.exp_avg' is not named <param>/<state>/<offset>"), std::string::npos)
      << message;
  EXPECT_NE(message.find("at offset 12, but layers.0.fc1.bias has 13 elements"), std::string::npos) << message;

  NamedTensors only_one = {state[0], state[1], state[2]};
  EXPECT_NE(load_error(*t.optimizer, only_one).find("'param' of layers.0.fc1.weight: elements [0, 91) are missing"),
            std::string::npos);
}

}  // namespace
}  // namespace megatron::optim
