// Optimizer state piece names: the texts Megatron-style checkpoints of this project hold (written
// by the optimizer, reassembled by the resharder), taken apart and rebuilt.
#include "megatron/optim/optimizer_state_piece.h"

#include <gtest/gtest.h>

#include <string>

namespace megatron::optim {
namespace {

TEST(OptimizerStatePiece, NamesRoundTrip) {
  const OptimizerStatePiece piece{"decoder.layers.3.mlp.linear_fc1.weight", OptimizerState::kExpAvgSq, 4096};
  EXPECT_EQ(piece.name(), "decoder.layers.3.mlp.linear_fc1.weight/exp_avg_sq/4096");
  EXPECT_EQ(parse_optimizer_state_piece(piece.name()), piece);
  const auto chunked = parse_optimizer_state_piece("model1.embedding.word_embeddings.weight/param/0");
  ASSERT_TRUE(chunked.has_value());
  EXPECT_EQ(chunked->param, "model1.embedding.word_embeddings.weight");
  EXPECT_EQ(chunked->state, OptimizerState::kParam);
  EXPECT_EQ(chunked->offset, 0);
  EXPECT_EQ(optimizer_state_name(OptimizerState::kExpAvg), "exp_avg");
}

TEST(OptimizerStatePiece, SaysWhyANameIsNotAPiece) {
  for (const char* bad : {"w", "w/param", "/param/0", "w/param/", "w/param/-1", "w/param/1x", "w/param/ 1"}) {
    std::string why;
    EXPECT_FALSE(parse_optimizer_state_piece(bad, &why).has_value()) << bad;
    EXPECT_EQ(why, "is not named <param>/<state>/<offset>") << bad;
  }
  std::string why;
  EXPECT_FALSE(parse_optimizer_state_piece("w/momentum/0", &why).has_value());
  EXPECT_EQ(why, "names an unknown state (states: param, exp_avg, exp_avg_sq)");
}

}  // namespace
}  // namespace megatron::optim
