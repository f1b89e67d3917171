// summarize() / format_summary(): counts, token id range and nearest-rank length percentiles,
// on a hand-made dataset, an empty one and the golden Megatron dataset.
#include <gtest/gtest.h>

#include <filesystem>

#include "megatron/core/check.h"
#include "megatron/data/dataset_summary.h"
#include "test_support.h"

namespace megatron::data {
namespace {

namespace fs = std::filesystem;
using megatron::testing::TempDir;

TEST(DatasetSummary, CountsTokensAndLengthPercentiles) {
  TempDir dir;
  {
    IndexedDatasetWriter writer(dir / "ds", DType::kInt32);
    // Ten documents of 1..10 tokens (ids = length * 1000 + position), plus one empty one.
    for (std::int32_t n = 1; n <= 10; ++n) {
      std::vector<std::int32_t> tokens;
      for (std::int32_t i = 0; i < n; ++i) tokens.push_back(n * 1000 + i);
      const std::vector<std::int32_t> lengths =
          n == 10 ? std::vector<std::int32_t>{4, 6} : std::vector<std::int32_t>{n};
      writer.add_document(tokens, lengths);
    }
    writer.add_document({}, {});
    writer.finalize();
  }
  const DatasetSummary s = summarize(IndexedDataset(dir / "ds"));
  EXPECT_EQ(s.dtype, "int32");
  EXPECT_EQ(s.documents, 11u);
  EXPECT_EQ(s.sequences, 11u);
  EXPECT_EQ(s.tokens, 55u);
  EXPECT_EQ(s.bin_bytes, 220u);
  EXPECT_EQ(s.idx_bytes, fs::file_size(dir / "ds.idx"));
  EXPECT_EQ(s.min_token_id, 1000);
  EXPECT_EQ(s.max_token_id, 10009);

  // Documents: 0, 1, ..., 10 tokens.
  EXPECT_EQ(s.document_tokens.count, 11u);
  EXPECT_EQ(s.document_tokens.min, 0u);
  EXPECT_EQ(s.document_tokens.max, 10u);
  EXPECT_DOUBLE_EQ(s.document_tokens.mean, 5.0);
  EXPECT_EQ(s.document_tokens.p50, 5u);   // rank ceil(5.5) = 6 of 11
  EXPECT_EQ(s.document_tokens.p90, 9u);   // rank ceil(9.9) = 10
  EXPECT_EQ(s.document_tokens.p99, 10u);  // rank 11
  EXPECT_EQ(s.document_tokens.zero_count, 1u);

  // Sequences: 1..9, 4, 6 (the empty document has none).
  EXPECT_EQ(s.sequence_tokens.count, 11u);
  EXPECT_EQ(s.sequence_tokens.min, 1u);
  EXPECT_EQ(s.sequence_tokens.max, 9u);
  EXPECT_EQ(s.sequence_tokens.p50, 5u);  // sorted 1 2 3 4 4 5 6 6 7 8 9, rank 6
  EXPECT_EQ(s.sequence_tokens.zero_count, 0u);
}

TEST(DatasetSummary, HandlesADatasetWithoutDocuments) {
  TempDir dir;
  IndexedDatasetWriter(dir / "empty", DType::kUInt16).finalize();
  const DatasetSummary s = summarize(IndexedDataset(dir / "empty"));
  EXPECT_EQ(s.documents, 0u);
  EXPECT_EQ(s.tokens, 0u);
  EXPECT_EQ(s.bin_bytes, 0u);
  EXPECT_EQ(s.idx_bytes, 42u);
  EXPECT_EQ(s.document_tokens.count, 0u);
  EXPECT_NE(format_summary(s).find("token ids        (none)"), std::string::npos);
}

TEST(DatasetSummary, DescribesTheGoldenDataset) {
  const DatasetSummary s = summarize(IndexedDataset(megatron::testing::golden_dataset_prefix()));
  EXPECT_EQ(s.dtype, "uint16");
  EXPECT_EQ(s.documents, 525u);
  EXPECT_EQ(s.sequences, 3803u);
  EXPECT_EQ(s.tokens, 3693760u);
  EXPECT_EQ(s.bin_bytes, 7387520u);
  EXPECT_EQ(s.idx_bytes, 49878u);
  EXPECT_EQ(s.min_token_id, 0);
  EXPECT_EQ(s.max_token_id, 50256);
  EXPECT_EQ(s.document_tokens.zero_count, 6u);
  EXPECT_EQ(s.document_tokens.max, 564606u);
  EXPECT_EQ(s.document_tokens.p50, 539u);
  EXPECT_EQ(s.document_tokens.p90, 16556u);
  EXPECT_EQ(s.document_tokens.p99, 97951u);

  const std::string text = format_summary(s);
  for (const char* part : {"documents        525\n", "sequences        3803\n",
                           "tokens           3693760\n", "dtype            uint16\n",
                           "token ids        0 .. 50256\n", "p90 16556"}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << " not in:\n" << text;
  }
}

}  // namespace
}  // namespace megatron::data
