// The param-and-grad buffer in one process: bucket layouts against values of Megatron's own
// layout functions (_compute_default_per_buffer_param_layout and DistributedOptimizer.
// _compute_per_buffer_param_layout, run separately in Python on the same sizes), the parameters as
// views into the buffer with their values kept, LibTorch accumulating into the pre-set .grad views
// in place across micro-batches and backward calls, zero_grad, and the overlap hooks' guard.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "ddp_test_model.h"
#include "megatron/core/check.h"
#include "megatron/parallel/data_parallel.h"
#include "megatron/parallel/single_process_context.h"

namespace megatron::parallel {
namespace {

using testing::TinyModel;

const std::vector<std::int64_t> kNumels = {1000, 30, 7, 300, 300, 5, 64, 129};

std::vector<std::pair<std::int64_t, std::int64_t>> ranges(const BufferLayout& l) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (const Range& r : l.params) out.emplace_back(r.begin, r.end);
  return out;
}
std::vector<std::pair<std::int64_t, std::int64_t>> buckets(const BufferLayout& l) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (const auto& b : l.buckets) out.emplace_back(b.range.begin, b.range.end);
  return out;
}
std::vector<std::int64_t> unpadded(const BufferLayout& l) {
  std::vector<std::int64_t> out;
  for (const auto& b : l.buckets) out.push_back(b.numel_unpadded);
  return out;
}

using Pairs = std::vector<std::pair<std::int64_t, std::int64_t>>;

TEST(BufferLayout, MatchesMegatronWithoutPadding) {
  const BufferLayout one = make_buffer_layout(kNumels, std::nullopt, 4, false);
  EXPECT_EQ(ranges(one),
            (Pairs{{835, 1835}, {805, 835}, {798, 805}, {498, 798}, {198, 498}, {193, 198}, {129, 193}, {0, 129}}));
  EXPECT_EQ(buckets(one), (Pairs{{0, 1835}}));
  EXPECT_EQ(one.numel, 1835);

  const BufferLayout three = make_buffer_layout(kNumels, 200, 4, false);
  EXPECT_EQ(ranges(three), ranges(one));
  EXPECT_EQ(three.param_bucket, (std::vector<int>{2, 2, 2, 1, 0, 0, 0, 0}));
  EXPECT_EQ(buckets(three), (Pairs{{0, 498}, {498, 798}, {798, 1835}}));
  EXPECT_EQ(unpadded(three), (std::vector<std::int64_t>{498, 300, 1037}));
  EXPECT_EQ(three.buckets[0].params, (std::vector<int>{7, 6, 5, 4}));  // reverse order of the list
}

TEST(BufferLayout, MatchesMegatronForTheDistributedOptimizer) {
  const BufferLayout dp3 = make_buffer_layout(kNumels, 200, 3, true);
  EXPECT_EQ(
      ranges(dp3),
      (Pairs{{1280, 2280}, {1216, 1246}, {1152, 1159}, {768, 1068}, {448, 748}, {384, 389}, {192, 256}, {0, 129}}));
  EXPECT_EQ(dp3.param_bucket, (std::vector<int>{3, 3, 3, 2, 1, 1, 0, 0}));
  EXPECT_EQ(buckets(dp3), (Pairs{{0, 384}, {384, 768}, {768, 1152}, {1152, 2304}}));
  EXPECT_EQ(unpadded(dp3), (std::vector<std::int64_t>{256, 364, 300, 1128}));
  EXPECT_EQ(dp3.numel, 2304);

  const BufferLayout dp4 = make_buffer_layout(kNumels, 400, 4, true);
  EXPECT_EQ(ranges(dp4),
            (Pairs{{1152, 2152}, {1024, 1054}, {960, 967}, {640, 940}, {320, 620}, {256, 261}, {192, 256}, {0, 129}}));
  EXPECT_EQ(dp4.param_bucket, (std::vector<int>{2, 1, 1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(buckets(dp4), (Pairs{{0, 640}, {640, 1152}, {1152, 2176}}));
  EXPECT_EQ(unpadded(dp4), (std::vector<std::int64_t>{620, 414, 1000}));

  const BufferLayout single = make_buffer_layout(kNumels, std::nullopt, 3, true);
  EXPECT_EQ(buckets(single), (Pairs{{0, 2304}}));
  EXPECT_EQ(unpadded(single), (std::vector<std::int64_t>{2088}));
  for (const auto& b : dp3.buckets) EXPECT_EQ(b.range.numel() % 3, 0);
}

TEST(BufferLayout, BucketSizeFollowsMegatronsRules) {
  DataParallelConfig c;
  EXPECT_EQ(effective_bucket_size(c, 8, 0), std::nullopt);  // no overlap: one bucket
  c.overlap_grad_reduce = true;
  EXPECT_EQ(effective_bucket_size(c, 8, 0), 40'000'000);
  EXPECT_EQ(effective_bucket_size(c, 64, 0), 64'000'000);
  EXPECT_EQ(effective_bucket_size(c, 64, 1), std::nullopt);  // later pipeline stages: one bucket
  c.bucket_size = 1234;
  EXPECT_EQ(effective_bucket_size(c, 8, 0), 1234);
  c.disable_bucketing = true;
  EXPECT_EQ(effective_bucket_size(c, 8, 0), std::nullopt);
  c.disable_bucketing = false;
  c.bucket_size = 0;
  EXPECT_THROW(effective_bucket_size(c, 8, 0), Error);
}

TEST(DataParallelBuffers, ParametersBecomeViewsWithTheirValues) {
  TinyModel model = TinyModel::make(1);
  const TinyModel before = model.clone();
  at::Tensor held = model.params[3].second;  // another handle the "model" keeps
  DataParallelConfig config;
  config.overlap_grad_reduce = true;
  config.bucket_size = 20;
  DataParallelBuffers buffer(model.params, model.layouts, single_process_context(), config);
  EXPECT_EQ(buffer.layout().buckets.size(), 3u);
  const auto* base = static_cast<const char*>(buffer.param_data().data_ptr());
  for (std::size_t i = 0; i < model.params.size(); ++i) {
    const at::Tensor& p = model.params[i].second;
    EXPECT_TRUE(at::equal(p, before.params[i].second)) << model.params[i].first;
    EXPECT_EQ(static_cast<const char*>(p.data_ptr()), base + buffer.layout().params[i].begin * 4);
    EXPECT_TRUE(p.requires_grad() && p.is_leaf());
    EXPECT_TRUE(at::equal(p.grad(), at::zeros_like(p)));
  }
  EXPECT_EQ(held.data_ptr(), model.params[3].second.data_ptr());
}

TEST(DataParallelBuffers, BackwardAccumulatesIntoTheBufferInPlace) {
  for (const bool overlap : {false, true}) {
    TinyModel model = TinyModel::make(2);
    TinyModel dense = model.clone();
    DataParallelConfig config;
    config.overlap_grad_reduce = overlap;
    config.bucket_size = 20;
    DataParallelBuffers buffer(model.params, model.layouts, single_process_context(), config);
    ASSERT_EQ(buffer.layout().buckets.size(), overlap ? 3u : 1u);
    std::vector<void*> grad_ptrs;
    for (const auto& [name, p] : model.params) grad_ptrs.push_back(p.grad().data_ptr());
    for (int iteration = 0; iteration < 3; ++iteration) {
      buffer.zero_grad();
      for (auto& [name, p] : dense.params) p.mutable_grad() = at::Tensor();
      for (int mb = 0; mb < 3; ++mb) {
        buffer.set_last_microbatch(mb == 2);
        const auto [x, t] = TinyModel::batch(static_cast<std::uint64_t>(10 * iteration + mb));
        model.loss(x, t).backward();
        dense.loss(x, t).backward();
        // With overlap, from the second iteration the last backward starts every bucket.
        const bool all_started = overlap && iteration > 0 && mb == 2;
        EXPECT_EQ(buffer.started_buckets(), all_started ? 3 : 0) << "iteration " << iteration << ", micro-batch " << mb;
      }
      buffer.finish_grad_sync();
      EXPECT_EQ(buffer.started_buckets(), 0);
      for (std::size_t i = 0; i < model.params.size(); ++i) {
        const at::Tensor& g = model.params[i].second.grad();
        EXPECT_EQ(g.data_ptr(), grad_ptrs[i]) << model.params[i].first << " lost its view";
        EXPECT_TRUE(at::equal(g, dense.params[i].second.grad())) << model.params[i].first;
      }
      const at::Tensor flat_dense =
          at::cat({dense.params[4].second.grad().flatten(), dense.params[3].second.grad().flatten()});
      EXPECT_TRUE(at::equal(buffer.grad_data().narrow(0, 0, flat_dense.numel()), flat_dense));
    }
  }
}

TEST(DataParallelBuffers, ZeroGradRestoresAReplacedGrad) {
  TinyModel model = TinyModel::make(3);
  DataParallelBuffers buffer(model.params, model.layouts, single_process_context(), DataParallelConfig{});
  model.params[0].second.mutable_grad() = at::Tensor();
  model.params[1].second.mutable_grad() = at::ones({TinyModel::kHidden});
  buffer.zero_grad();
  const auto [x, t] = TinyModel::batch(0);
  model.loss(x, t).backward();
  buffer.finish_grad_sync();
  const auto* base = static_cast<const char*>(buffer.grad_data().data_ptr());
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(static_cast<const char*>(model.params[i].second.grad().data_ptr()),
              base + buffer.layout().params[i].begin * 4);
  }
  EXPECT_GT(buffer.grad_data().abs().sum().item<float>(), 0.0f);
}

TEST(DataParallelBuffers, OverlapRefusesAGradientAfterItsBucketStarted) {
  TinyModel model = TinyModel::make(4);
  DataParallelConfig config;
  config.overlap_grad_reduce = true;
  config.bucket_size = 1;  // one parameter per bucket
  DataParallelBuffers buffer(model.params, model.layouts, single_process_context(), config);
  const auto [x, t] = TinyModel::batch(0);
  buffer.zero_grad();
  model.loss(x, t).backward();  // first iteration: learns one accumulation per parameter
  buffer.finish_grad_sync();
  buffer.zero_grad();
  model.loss(x, t).backward();  // every bucket starts from the hooks
  try {
    model.loss(x, t).backward();  // a second "last" micro-batch
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("set_last_microbatch(false)"), std::string::npos) << e.what();
  }
}

TEST(DataParallelBuffers, RejectsBadParameters) {
  TinyModel model = TinyModel::make(5);
  NamedTensors twice = model.params;
  twice.push_back(model.params[0]);
  std::vector<TensorParallelLayout> layouts(twice.size());
  EXPECT_THROW(DataParallelBuffers(twice, layouts, single_process_context(), DataParallelConfig{}), Error);
  NamedTensors mixed = {{"a", at::zeros({3}).requires_grad_(true)},
                        {"b", at::zeros({3}, at::kDouble).requires_grad_(true)}};
  EXPECT_THROW(
      DataParallelBuffers(mixed, std::vector<TensorParallelLayout>(2), single_process_context(), DataParallelConfig{}),
      Error);
}

TEST(DataParallelBuffers, SequenceParallelReductionIsANoOpAtTp1) {
  TinyModel model = TinyModel::make(6);
  model.layouts[2].sequence_parallel = true;
  DataParallelBuffers buffer(model.params, model.layouts, single_process_context(), DataParallelConfig{});
  const auto [x, t] = TinyModel::batch(0);
  model.loss(x, t).backward();
  buffer.finish_grad_sync();
  const at::Tensor before = model.params[2].second.grad().clone();
  allreduce_sequence_parallel_grads(buffer);
  EXPECT_TRUE(at::equal(model.params[2].second.grad(), before));
}

}  // namespace
}  // namespace megatron::parallel
