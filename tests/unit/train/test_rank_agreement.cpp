// Naming what differs between two ranks' resolved arguments (the collective itself runs in the
// multi-rank end-to-end case rank_failures.sh ranks_disagree).
#include "megatron/train/rank_agreement.h"

#include <gtest/gtest.h>

#include "megatron/train/arguments.h"

namespace megatron::train {
namespace {

nlohmann::json resolved(const std::vector<std::string>& more) {
  std::vector<std::string> args = {"--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
                                   "--seq-length", "32", "--max-position-embeddings", "32", "--micro-batch-size", "2",
                                   "--train-iters", "10", "--lr", "1e-3", "--tokenizer-type", "NullTokenizer",
                                   "--vocab-size", "100"};
  args.insert(args.end(), more.begin(), more.end());
  return nlohmann::json::parse(to_json(parse_arguments(args)));
}

TEST(RankAgreement, NamesEachDifferingFlagWithBothValues) {
  const auto diffs = argument_differences(resolved({"--hidden-size", "48", "--lr", "0.002"}), resolved({}), 0);
  // The derived sizes follow the hidden size.
  EXPECT_EQ(diffs, (std::vector<std::string>{"--hidden-size 48 (rank 0: 64)", "--ffn-hidden-size 192 (rank 0: 256)",
                                             "--kv-channels 12 (rank 0: 16)", "--lr 0.002 (rank 0: 0.001)"}));
}

TEST(RankAgreement, RankNumbersAreNotDifferences) {
  nlohmann::json other = resolved({});
  other["rank"] = 3;
  other["local_rank"] = 1;
  EXPECT_TRUE(argument_differences(other, resolved({}), 0).empty());
  EXPECT_EQ(argument_differences(resolved({"--use-distributed-optimizer"}), resolved({}), 0),
            std::vector<std::string>{"--use-distributed-optimizer true (rank 0: false)"});
}

}  // namespace
}  // namespace megatron::train
