// The batch reader: Megatron's sampler order for each DP rank, the same batches with and without
// the prefetch thread, the attention mask of --reset-attention-mask, errors delivered in order,
// and a reader dropped mid-split.
#include "megatron/train/batch_reader.h"

#include <gtest/gtest.h>

#include <atomic>

#include "megatron/core/check.h"
#include "test_support.h"

using megatron::testing::expect_contains;

namespace megatron::train {
namespace {

// Sample k's text is k * 1000 + j (j = 0..S); an EOD (id 7) at `eod_at`; reading `fail_at` throws.
class CountingDataset : public data::SampleDataset {
 public:
  CountingDataset(std::uint64_t size, std::int32_t seq, data::SampleOptions options = {})
      : size_(size), seq_(seq), options_(options) {}
  std::uint64_t size() const override { return size_; }
  std::int32_t sequence_length() const override { return seq_; }
  const data::SampleOptions& sample_options() const override { return options_; }
  void read_text(std::uint64_t k, std::span<std::int64_t> text) const override {
    ++reads;
    MEGATRON_CHECK(k != fail_at, "sample ", k, " is unreadable");
    for (std::size_t j = 0; j < text.size(); ++j) text[j] = static_cast<std::int64_t>(k * 1000 + j);
    if (eod_at >= 0) text[static_cast<std::size_t>(eod_at)] = 7;
  }
  std::uint64_t fail_at = ~std::uint64_t{0};
  int eod_at = -1;
  mutable std::atomic<int> reads{0};

 private:
  std::uint64_t size_;
  std::int32_t seq_;
  data::SampleOptions options_;
};

BatchReaderOptions options(int mbs, int dp_rank, int dp_size, int prefetch) {
  return BatchReaderOptions{mbs, dp_rank, dp_size, prefetch, at::kCPU};
}

// The first token of each sample of each micro-batch, until the split ends.
std::vector<std::vector<std::int64_t>> first_tokens(BatchReader& reader) {
  std::vector<std::vector<std::int64_t>> out;
  while (auto batch = reader.next()) {
    std::vector<std::int64_t> row;
    for (std::int64_t i = 0; i < batch->tokens.size(0); ++i) row.push_back(batch->tokens[i][0].item<std::int64_t>());
    out.push_back(row);
  }
  return out;
}

TEST(BatchReader, EachDataParallelRankReadsItsSliceOfEveryStepBatchInOrder) {
  // 23 samples, micro-batch 2, DP 2: step batches of 4 samples; from 4 consumed on, four whole
  // steps remain (samples 4..19), and the 3 left over make no step (Megatron drops them).
  const CountingDataset dataset(23, 8);
  for (const int prefetch : {0, 1, 4}) {
    BatchReader rank0(dataset, 4, options(2, 0, 2, prefetch));
    BatchReader rank1(dataset, 4, options(2, 1, 2, prefetch));
    using Rows = std::vector<std::vector<std::int64_t>>;
    EXPECT_EQ(first_tokens(rank0), (Rows{{4000, 5000}, {8000, 9000}, {12000, 13000}, {16000, 17000}}));
    EXPECT_EQ(first_tokens(rank1), (Rows{{6000, 7000}, {10000, 11000}, {14000, 15000}, {18000, 19000}}));
    EXPECT_FALSE(rank0.next().has_value());  // the end stays the end
  }
}

TEST(BatchReader, PrefetchedBatchesEqualTheOnesReadInNext) {
  data::SampleOptions o;
  o.eod = 7;
  o.reset_position_ids = true;
  o.reset_attention_mask = true;
  o.eod_mask_loss = true;
  CountingDataset dataset(12, 6, o);
  dataset.eod_at = 2;
  BatchReader direct(dataset, 0, options(3, 0, 1, 0));
  BatchReader ahead(dataset, 0, options(3, 0, 1, 3));
  for (int step = 0; step < 4; ++step) {
    const auto a = direct.next();
    const auto b = ahead.next();
    ASSERT_TRUE(a && b);
    for (const auto& [x, y] : {std::pair{a->tokens, b->tokens}, {a->labels, b->labels}, {a->loss_mask, b->loss_mask},
                               {a->position_ids, b->position_ids}, {a->attention_mask, b->attention_mask}}) {
      EXPECT_TRUE(at::equal(x, y));
    }
    EXPECT_EQ(a->loss_tokens, b->loss_tokens);
    // The EOD at position 2: its loss is masked (5 of 6 tokens count), positions restart at 3,
    // and the queries from 3 on see keys 3.. only (true = masked).
    EXPECT_EQ(a->loss_tokens, 3 * 5.0);
    EXPECT_TRUE(at::equal(a->position_ids[0], at::tensor(std::vector<std::int64_t>{0, 1, 2, 0, 1, 2})));
    const at::Tensor mask = a->attention_mask[1][0];
    at::Tensor expected = at::ones({6, 6}, at::kBool).triu(1);
    expected.slice(0, 3).slice(1, 0, 3).fill_(true);
    EXPECT_TRUE(at::equal(mask, expected)) << mask;
  }
  EXPECT_FALSE(ahead.next().has_value());
}

TEST(BatchReader, AnErrorOfThePrefetchThreadComesAfterTheBatchesBeforeIt) {
  CountingDataset dataset(20, 4);
  dataset.fail_at = 5;
  BatchReader reader(dataset, 0, options(2, 0, 1, 4));
  EXPECT_TRUE(reader.next().has_value());  // samples 0, 1
  EXPECT_TRUE(reader.next().has_value());  // samples 2, 3
  expect_contains(megatron::testing::error_of([&] { reader.next(); }), {"sample 5 is unreadable"});
}

TEST(BatchReader, ReadsAheadAtMostItsDepthAndStopsWhenDropped) {
  CountingDataset dataset(1000, 4);
  {
    BatchReader reader(dataset, 0, options(1, 0, 1, 3));
    ASSERT_TRUE(reader.next().has_value());
    // The thread refills to 3 ready batches and then waits: at most 1 + 3 + 1 samples read.
    for (int i = 0; i < 2000 && dataset.reads < 4; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_GE(dataset.reads.load(), 4);
    EXPECT_LE(dataset.reads.load(), 5);
  }  // the destructor stops a thread waiting on its full queue
  EXPECT_LE(dataset.reads.load(), 5);
}

}  // namespace
}  // namespace megatron::train
