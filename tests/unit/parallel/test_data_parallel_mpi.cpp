// The DP gradient reduction under mpirun (2 and 4 ranks): with rank-dependent micro-batches, the
// gradients after finish_grad_sync equal the average of every rank's gradients computed densely in
// each process, bit for bit (the tiny model's gradients are exact dyadic sums), with and without
// --overlap-grad-reduce and with the distributed optimizer's reduce-scatter (this rank's shard of
// every bucket); an unused parameter does not hold back the overlap; the sequence-parallel
// gradients are summed over TP.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "ddp_test_model.h"
#include "megatron/parallel/data_parallel.h"
#include "megatron/parallel/tensor_parallel.h"
#include "mpi_test_support.h"
#include "tensor_expect.h"

namespace megatron::parallel {
namespace {

using testing::TinyModel;

Communicator& world() { return testing::world(); }

// Micro-batch `mb` of DP rank `rank` in iteration `it` (two micro-batches per rank).
std::uint64_t batch_index(int it, int rank, int dp, int mb) {
  return static_cast<std::uint64_t>((it * dp + rank) * 2 + mb);
}

// The dense DP-average gradients of iteration `it`: every rank's micro-batches in this process.
std::vector<at::Tensor> dense_average(const TinyModel& init, int it, int dp) {
  TinyModel dense = init.clone();
  for (int rank = 0; rank < dp; ++rank) {
    for (int mb = 0; mb < 2; ++mb) {
      const auto [x, t] = TinyModel::batch(batch_index(it, rank, dp, mb));
      (dense.loss(x, t) * 0.5).backward();
    }
  }
  std::vector<at::Tensor> grads;
  for (const auto& [name, p] : dense.params) grads.push_back(p.grad() / dp);
  return grads;
}

void expect_dp_average(const DataParallelBuffers& buffer, const std::vector<at::Tensor>& want) {
  const at::Tensor flat = testing::as_flat_buffer(want, buffer.layout());
  for (std::size_t b = 0; b < buffer.layout().buckets.size(); ++b) {
    const Range owned = buffer.owned_range(static_cast<int>(b));
    const at::Tensor got = buffer.grad_data().narrow(0, owned.begin, owned.numel());
    const at::Tensor expected = flat.narrow(0, owned.begin, owned.numel());
    megatron::testing::expect_equal(got, expected, "bucket " + std::to_string(b));
  }
  if (!buffer.config().use_distributed_optimizer) {
    for (std::size_t i = 0; i < want.size(); ++i) {
      EXPECT_TRUE(at::equal(buffer.params()[i].second.grad(), want[i])) << buffer.params()[i].first;
    }
  }
}

TEST(DataParallelMpi, GradientsAreTheDpAverage) {
  const ParallelContext& pc = testing::tp_dp_context(world(), 1);
  const int dp = pc.dp_cp->size(), rank = pc.dp_cp->rank();
  ASSERT_EQ(dp, world().world_size());
  for (const bool distributed : {false, true}) {
    for (const bool overlap : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "distributed " << distributed << ", overlap " << overlap);
      const TinyModel init = TinyModel::make(1);
      TinyModel model = init.clone();
      DataParallelConfig config;
      config.overlap_grad_reduce = overlap;
      config.use_distributed_optimizer = distributed;
      config.bucket_size = 20;
      DataParallelBuffers buffer(model.params, model.layouts, pc, config);
      EXPECT_EQ(buffer.layout().buckets.size(), overlap ? 3u : 1u);
      for (int it = 0; it < 3; ++it) {  // the first iteration with overlap learns, the others launch from hooks
        buffer.zero_grad();
        for (int mb = 0; mb < 2; ++mb) {
          buffer.set_last_microbatch(mb == 1);
          const auto [x, t] = TinyModel::batch(batch_index(it, rank, dp, mb));
          (model.loss(x, t) * 0.5).backward();
        }
        EXPECT_EQ(buffer.started_buckets(), overlap && it > 0 ? 3 : 0);  // launched during backward
        buffer.finish_grad_sync();
        expect_dp_average(buffer, dense_average(init, it, dp));
      }
    }
  }
}

TEST(DataParallelMpi, UnusedParameterDoesNotHoldBackTheOverlap) {
  const ParallelContext& pc = testing::tp_dp_context(world(), 1);
  const int dp = pc.dp_cp->size(), rank = pc.dp_cp->rank();
  const TinyModel init = TinyModel::make(2);
  TinyModel model = init.clone();
  NamedTensors params = model.params;
  params.insert(params.begin() + 2, {"layers.0.unused.weight", at::ones({9}).requires_grad_(true)});
  std::vector<TensorParallelLayout> layouts(params.size());
  DataParallelConfig config;
  config.overlap_grad_reduce = true;
  config.use_distributed_optimizer = true;
  config.bucket_size = 1;  // one parameter per bucket
  DataParallelBuffers buffer(params, layouts, pc, config);
  for (int it = 0; it < 2; ++it) {
    buffer.zero_grad();
    for (int mb = 0; mb < 2; ++mb) {
      buffer.set_last_microbatch(mb == 1);
      const auto [x, t] = TinyModel::batch(batch_index(it, rank, dp, mb));
      (model.loss(x, t) * 0.5).backward();
    }
    buffer.finish_grad_sync();
    std::vector<at::Tensor> want = dense_average(init, it, dp);
    want.insert(want.begin() + 2, at::zeros({9}));
    expect_dp_average(buffer, want);
  }
}

TEST(DataParallelMpi, SequenceParallelGradientsAreSummedOverTp) {
  const int tp = world().world_size();
  const ParallelContext& pc = testing::tp_dp_context(world(), tp);
  TinyModel model = TinyModel::make(3);
  model.layouts[1].sequence_parallel = true;
  model.layouts[2].sequence_parallel = true;
  DataParallelBuffers buffer(model.params, model.layouts, pc, DataParallelConfig{});
  std::vector<at::Tensor> base;
  for (std::size_t i = 0; i < model.params.size(); ++i) {
    base.push_back(TinyModel::dyadic(model.params[i].second.sizes().vec(), 50 + i));
    model.params[i].second.grad().copy_(base[i] * (pc.tp->rank() + 1));
  }
  buffer.finish_grad_sync();  // DP 1: nothing to average
  allreduce_sequence_parallel_grads(buffer);
  for (std::size_t i = 0; i < model.params.size(); ++i) {
    const double factor = model.layouts[i].sequence_parallel ? tp * (tp + 1) / 2 : pc.tp->rank() + 1;
    EXPECT_TRUE(at::equal(model.params[i].second.grad(), base[i] * factor)) << model.params[i].first;
  }
}

}  // namespace
}  // namespace megatron::parallel
