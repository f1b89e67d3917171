// The optimizer under mpirun (2 and 4 ranks): the distributed optimizer gives the plain one's
// parameters after several clipped steps, both follow the single-process AdamW on the whole batch;
// the gradient norm of a TP-sharded model (TP 2 x DP 1, TP 2 x DP 2, TP 4) equals the dense norm,
// replicated parameters counted once; state saved by the distributed optimizer at DP = world
// resumes at DP / 2 (distributed) and DP 1 (plain) with the same re-split state and the same
// parameters as the uninterrupted run, reading only the pieces each rank owns; the optimizer state
// per rank shrinks by the DP size.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "megatron/core/check.h"
#include "megatron/optim/adamw.h"
#include "optim/reference_adamw.h"
#include "megatron/optim/optimizer.h"
#include "megatron/parallel/data_parallel.h"
#include "mpi_test_support.h"
#include "parallel/ddp_test_model.h"

namespace megatron::optim {
namespace {

using parallel::DataParallelBuffers;
using parallel::DataParallelConfig;
using parallel::ParallelContext;
using testing::TinyModel;

constexpr double kLr = 0.01, kWd = 0.1, kClip = 0.5;

parallel::Communicator& world() { return testing::world(); }

// A model copy with its buffer and optimizer on one layout.
struct Replica {
  Replica(const TinyModel& init, const ParallelContext& pc, const DataParallelConfig& config) : model(init.clone()) {
    buffer = std::make_unique<DataParallelBuffers>(model.params, model.layouts, pc, config);
    optimizer = std::make_unique<Optimizer>(*buffer, buffer->context(), AdamWConfig{});
  }
  // Iteration `it` of the global batch (2 x world micro-batches) split over this layout's DP ranks,
  // each micro-batch's loss divided by the rank's micro-batch count (Megatron's scaling).
  double step(int it) {
    const int dp = buffer->context().dp_cp->size(), rank = buffer->context().dp_cp->rank();
    const int total = 2 * world().world_size(), per_rank = total / dp;
    buffer->zero_grad();
    for (int mb = 0; mb < per_rank; ++mb) {
      buffer->set_last_microbatch(mb == per_rank - 1);
      const auto [x, t] = TinyModel::batch(static_cast<std::uint64_t>(it * total + rank * per_rank + mb));
      (model.loss(x, t) / per_rank).backward();
    }
    buffer->finish_grad_sync();
    parallel::allreduce_sequence_parallel_grads(*buffer);
    return optimizer->step(kLr, kWd, kClip).grad_norm;
  }
  TinyModel model;
  std::unique_ptr<DataParallelBuffers> buffer;
  std::unique_ptr<Optimizer> optimizer;
};

DataParallelConfig ddp(bool distributed, bool overlap, std::int64_t bucket_size) {
  DataParallelConfig c;
  c.use_distributed_optimizer = distributed;
  c.overlap_grad_reduce = overlap;
  c.bucket_size = bucket_size;
  return c;
}

double max_diff(const TinyModel& a, const TinyModel& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.params.size(); ++i) {
    worst = std::max(worst, (a.params[i].second - b.params[i].second).abs().max().item<double>());
  }
  return worst;
}

TEST(OptimizerMpi, DistributedMatchesPlainAndTheSingleProcessRun) {
  const ParallelContext& pc = testing::tp_dp_context(world(), 1);
  const TinyModel init = TinyModel::make(5);
  Replica plain(init, pc, ddp(false, false, 20));
  Replica distributed(init, pc, ddp(true, true, 20));
  TinyModel dense = init.clone();
  testing::ReferenceAdamW reference(dense.params, AdamWConfig{});
  const int total = 2 * world().world_size();
  // Two ranks sum two addends either way; with more, all-reduce and reduce-scatter may add in
  // another order (an ulp per step).
  const double tolerance = world().world_size() == 2 ? 0.0 : 1e-6;
  for (int it = 0; it < 5; ++it) {
    const double norm = plain.step(it);
    EXPECT_NEAR(distributed.step(it), norm, (tolerance + 1e-12) * norm) << "iteration " << it;
    EXPECT_GT(norm, kClip);  // clipping is active
    reference.zero_grad();
    for (int mb = 0; mb < total; ++mb) {
      const auto [x, t] = TinyModel::batch(static_cast<std::uint64_t>(it * total + mb));
      (dense.loss(x, t) / total).backward();
    }
    EXPECT_NEAR(reference.clip_grad_norm(kClip), norm, 1e-6 * norm);
    reference.step(kLr, kWd);
    EXPECT_LE(max_diff(plain.model, distributed.model), tolerance) << "iteration " << it;
    EXPECT_LE(max_diff(plain.model, dense), 1e-6) << "iteration " << it;
  }
}

// A model sharded over TP like Megatron's layers: column-parallel fc1 (dim 0), row-parallel fc2
// (dim 1), a replicated norm and fc2 bias. Full tensors are the same on every rank.
struct ShardedGrads {
  std::vector<std::string> names = {"fc1.weight", "fc1.bias", "norm.weight", "fc2.weight", "fc2.bias"};
  std::vector<std::vector<std::int64_t>> shapes = {{8, 7}, {8}, {7}, {5, 8}, {5}};
  std::vector<parallel::TensorParallelLayout> layouts = {{0}, {0}, {-1}, {1}, {-1}};
};

TEST(OptimizerMpi, GradNormCountsEveryElementOnceUnderTp) {
  const ShardedGrads spec;
  std::vector<at::Tensor> full_grads;
  double dense_sq = 0.0;
  for (std::size_t i = 0; i < spec.shapes.size(); ++i) {
    full_grads.push_back(at::randn(spec.shapes[i], at::make_generator<at::CPUGeneratorImpl>(70 + i)));
    dense_sq += full_grads.back().to(at::kDouble).square().sum().item<double>();
  }
  const double dense_norm = std::sqrt(dense_sq);
  std::vector<int> tp_sizes = {2};  // TP 2 x DP 1, or TP 2 x DP 2 and TP 4 x DP 1 on 4 ranks
  if (world().world_size() > 2) tp_sizes.push_back(world().world_size());
  for (int tp : tp_sizes) {
    const ParallelContext& pc = testing::tp_dp_context(world(), tp);
    for (const bool distributed : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "TP " << tp << " x DP " << pc.dp->size() << ", distributed " << distributed);
      parallel::NamedTensors params;
      for (std::size_t i = 0; i < spec.shapes.size(); ++i) {
        params.emplace_back(spec.names[i],
                            parallel::shard_of_full(at::zeros(spec.shapes[i]), spec.layouts[i], pc.tp->rank(), tp)
                                .requires_grad_(true));
      }
      DataParallelBuffers buffer(params, spec.layouts, pc, ddp(distributed, false, 0));
      Optimizer optimizer(buffer, pc, AdamWConfig{});
      for (std::size_t i = 0; i < params.size(); ++i) {
        params[i].second.grad().copy_(parallel::shard_of_full(full_grads[i], spec.layouts[i], pc.tp->rank(), tp));
      }
      buffer.finish_grad_sync();  // the DP average of equal gradients: unchanged
      const double norm = optimizer.clip_grad_norm(dense_norm / 4);
      EXPECT_NEAR(norm, dense_norm, 1e-12 * dense_norm);
      // Clipped by max_norm / (norm + 1e-6): the owned gradients now have about a quarter of the norm.
      EXPECT_NEAR(optimizer.clip_grad_norm(0.0), dense_norm / 4 * dense_norm / (dense_norm + 1e-6), 1e-6 * dense_norm);
    }
  }
}

// Every rank's pieces to every rank (names as int64 codes, data as fp32), in rank order.
NamedTensors gather_pieces(const NamedTensors& mine) {
  auto group = world().world();
  NamedTensors all;
  for (int root = 0; root < world().world_size(); ++root) {
    at::Tensor count = at::full({1}, root == world().rank() ? static_cast<std::int64_t>(mine.size()) : 0, at::kLong);
    world().broadcast(count, root, *group).wait();
    for (std::int64_t k = 0; k < count.item<std::int64_t>(); ++k) {
      const bool own = root == world().rank();
      const std::string& name = own ? mine[static_cast<std::size_t>(k)].first : std::string();
      at::Tensor sizes =
          own ? at::tensor({static_cast<std::int64_t>(name.size()), mine[static_cast<std::size_t>(k)].second.numel()})
              : at::zeros({2}, at::kLong);
      world().broadcast(sizes, root, *group).wait();
      at::Tensor chars = at::zeros({sizes[0].item<std::int64_t>()}, at::kLong);
      at::Tensor data = at::zeros({sizes[1].item<std::int64_t>()});
      if (own) {
        for (std::size_t c = 0; c < name.size(); ++c)
          chars[static_cast<std::int64_t>(c)] = static_cast<std::int64_t>(name[c]);
        data.copy_(mine[static_cast<std::size_t>(k)].second);
      }
      world().broadcast(chars, root, *group).wait();
      world().broadcast(data, root, *group).wait();
      std::string decoded;
      for (std::int64_t c = 0; c < chars.numel(); ++c)
        decoded.push_back(static_cast<char>(chars[c].item<std::int64_t>()));
      all.emplace_back(decoded, data);
    }
  }
  return all;
}

// "<param>/<key>" -> the flat state assembled from pieces (duplicates overwrite with equal values).
std::map<std::string, at::Tensor> assemble(const NamedTensors& pieces, const TinyModel& model) {
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, data] : pieces) {
    const auto slash = name.rfind('/');
    const std::string key = name.substr(0, slash);
    const std::int64_t offset = std::stoll(name.substr(slash + 1));
    if (!out.count(key)) {
      for (const auto& [pname, p] : model.params) {
        if (key.rfind(pname + "/", 0) == 0) out[key] = at::full({p.numel()}, NAN);
      }
    }
    out.at(key).narrow(0, offset, data.numel()).copy_(data);
  }
  return out;
}

TEST(OptimizerMpi, DistributedStateResumesAtAnotherDpSize) {
  const int w = world().world_size();
  const TinyModel init = TinyModel::make(6);
  Replica straight(init, testing::tp_dp_context(world(), 1), ddp(true, true, 20));
  for (int it = 0; it < 2; ++it) straight.step(it);
  const NamedTensors saved = gather_pieces(straight.optimizer->state());
  const TinyModel saved_model = straight.model.clone();
  for (int it = 2; it < 5; ++it) straight.step(it);

  // (TP, distributed): every parameter replicated over TP, so TP t is a DP w / t run.
  for (const auto& [tp, distributed] : std::vector<std::pair<int, bool>>{{1, true}, {2, true}, {w, false}}) {
    const ParallelContext& pc = testing::tp_dp_context(world(), tp);
    SCOPED_TRACE(::testing::Message() << "resumed at DP " << pc.dp->size()
                                      << (distributed ? " distributed" : " plain"));
    Replica resumed(TinyModel::make(60), pc, ddp(distributed, distributed, 30));  // other values, other buckets
    // Only the pieces this rank owns in the new layout, as a resume reads them from the files.
    NamedTensors needed;
    std::int64_t needed_numel = 0, saved_numel = 0;
    for (const auto& [name, data] : saved) {
      saved_numel += data.numel();
      if (!resumed.optimizer->needs_state_piece(name, data.numel())) continue;
      needed.emplace_back(name, data);
      needed_numel += data.numel();
    }
    if (distributed && pc.dp->size() > 1) {
      EXPECT_LT(needed_numel, saved_numel);
    }
    if (!distributed) {
      EXPECT_EQ(needed_numel, saved_numel);
    }
    resumed.optimizer->load_state(needed, 2);
    EXPECT_EQ(max_diff(resumed.model, saved_model), 0.0);
    const auto want = assemble(saved, init), got = assemble(gather_pieces(resumed.optimizer->state()), init);
    ASSERT_EQ(got.size(), want.size());
    for (const auto& [key, tensor] : want) EXPECT_TRUE(at::equal(got.at(key), tensor)) << key;
    for (int it = 2; it < 5; ++it) resumed.step(it);
    EXPECT_EQ(resumed.optimizer->step_count(), 5);
    // The same layout continues bit for bit; another DP size sums the micro-batches in another order.
    const double diff = max_diff(resumed.model, straight.model);
    EXPECT_LE(diff, tp == 1 ? 0.0 : 1e-6);
    if (world().rank() == 0) std::printf("[ resumed at DP %d: max parameter difference %.3g ]\n", pc.dp->size(), diff);
  }
}

TEST(OptimizerMpi, StateShrinksByTheDpSize) {
  const ParallelContext& pc = testing::tp_dp_context(world(), 1);
  const int dp = pc.dp_cp->size();
  // A GPT-like set of shapes (hidden 256, 2 layers, vocab 2048): large enough for the padding not to matter.
  std::vector<std::vector<std::int64_t>> shapes = {{2048, 256}, {1024, 256}};
  for (int layer = 0; layer < 2; ++layer) {
    const std::vector<std::vector<std::int64_t>> layer_shapes = {{256}, {256}, {768, 256},  {768},  {256, 256},  {256},
                                                                 {256}, {256}, {1024, 256}, {1024}, {256, 1024}, {256}};
    shapes.insert(shapes.end(), layer_shapes.begin(), layer_shapes.end());
  }
  shapes.insert(shapes.end(), {{256}, {256}});
  std::int64_t numel = 0;
  auto make = [&] {
    parallel::NamedTensors params;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      params.emplace_back(str_cat("p", i), at::zeros(shapes[i]).requires_grad_(true));
    }
    return params;
  };
  for (const auto& [name, p] : make()) numel += p.numel();
  const std::vector<parallel::TensorParallelLayout> layouts(shapes.size());
  const parallel::NamedTensors plain_params = make(), dist_params = make();
  DataParallelBuffers plain_buffer(plain_params, layouts, pc, ddp(false, false, 0));
  DataParallelBuffers dist_buffer(dist_params, layouts, pc, ddp(true, false, 0));
  const Optimizer plain(plain_buffer, pc, AdamWConfig{}), distributed(dist_buffer, pc, AdamWConfig{});
  EXPECT_EQ(plain.state_numel(), 3 * numel);
  EXPECT_EQ(distributed.state_numel() * dp, 3 * dist_buffer.layout().numel);
  EXPECT_LE(distributed.state_numel() * dp, 3 * (numel + 64 * std::int64_t(shapes.size()) + 128 * dp));
  if (world().rank() == 0) {
    std::printf("[ %lld parameters: optimizer state per rank %lld bytes plain, %lld bytes distributed at DP %d ]\n",
                static_cast<long long>(numel), static_cast<long long>(plain.state_numel() * 4),
                static_cast<long long>(distributed.state_numel() * 4), dp);
  }
}

}  // namespace
}  // namespace megatron::optim
