// The pipeline schedules against spec 9: the phase counts of its 1F1B example (P=4, M=8), its
// interleaved order (P=2, V=2, M=4), event lists of small cases written out by hand from the
// spec's rules, and, for (P=4, M=8), (P=2, V=2, M=4) and (P=4, V=2, M=8), a simulation of all
// stages with Megatron's blocking batched exchanges: it finishes (no deadlock), every receive
// meets the send of the activation or gradient it needs, each step runs once after its inputs,
// and 1F1B keeps at most P - r micro-batches in flight on stage r.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <set>
#include <tuple>

#include "megatron/core/check.h"
#include "megatron/parallel/pipeline_layout.h"
#include "megatron/parallel/pipeline_schedule.h"

namespace megatron::parallel {
namespace {

std::string events(const PipelineShape& shape, int stage) {
  return to_string(pipeline_schedule(shape, stage), shape.chunks > 1);
}

TEST(PipelineSchedule, PhasesOfTheSpecsOneFOneBExample) {
  const PipelineShape shape{4, 1, 8, 0};
  const int want[4][3] = {{3, 5, 3}, {2, 6, 2}, {1, 7, 1}, {0, 8, 0}};
  for (int r = 0; r < 4; ++r) {
    const PipelinePhases p = pipeline_phases(shape, r);
    EXPECT_EQ(p.warmup, want[r][0]) << "stage " << r;
    EXPECT_EQ(p.steady, want[r][1]) << "stage " << r;
    EXPECT_EQ(p.cooldown, want[r][2]) << "stage " << r;
  }
}

TEST(PipelineSchedule, InterleavedOrderOfTheSpecsExample) {
  std::string order;
  for (const ChunkStep& s : interleaved_forward_order({2, 2, 4, 2})) {
    order += str_cat("(", s.microbatch, ",", s.chunk, ")");
  }
  EXPECT_EQ(order, "(0,0)(1,0)(0,1)(1,1)(2,0)(3,0)(2,1)(3,1)");
  // The last group takes the remaining micro-batches: M = 5, G = 3 -> groups {0,1,2} {3,4}.
  std::string tail;
  for (const ChunkStep& s : interleaved_forward_order({2, 2, 5, 3})) tail += std::to_string(s.microbatch);
  EXPECT_EQ(tail, "0120123434");
}

TEST(PipelineSchedule, NoPipeliningIsForwardThenBackwardPerMicrobatch) {
  EXPECT_EQ(events({1, 1, 3, 0}, 0), "F0 B0 F1 B1 F2 B2");
}

TEST(PipelineSchedule, OneFOneBByHand) {
  // P = 2, M = 3: stage 0 warms up with one forward; stage 1 (last) runs 1F1B from the start.
  EXPECT_EQ(events({2, 1, 3, 0}, 0), "F0 SF0 F1 SF1 RB0 B0 F2 SF2 RB1 B1 RB2 B2");
  EXPECT_EQ(events({2, 1, 3, 0}, 1), "RF0 F0 B0 SB0 RF1 F1 B1 SB1 RF2 F2 B2 SB2");
  // More stages than micro-batches: all warm-up on the first stage.
  EXPECT_EQ(events({4, 1, 2, 0}, 0), "F0 SF0 F1 SF1 RB0 B0 RB1 B1");
}

TEST(PipelineSchedule, InterleavedByHand) {
  // P = 2, V = 2, M = 4, G = 2, stage 0: warm-up (2 - 0 - 1) * 2 + 1 * 2 = 4 forward steps, the
  // last one also receiving the first backward's gradient; 4 steady steps; 4 cool-down steps.
  EXPECT_EQ(events({2, 2, 4, 2}, 0),
            "F0.0 SF0.0 F1.0 RF0.1 SF1.0 F0.1 RF1.1 SF0.1 F1.1 SF1.1 RB0.1 "
            "F2.0 B0.1 SB0.1 SF2.0 RB1.1 F3.0 B1.1 SB1.1 RF2.1 SF3.0 RB0.0 "
            "F2.1 B0.0 RF3.1 SF2.1 RB1.0 F3.1 B1.0 SF3.1 RB2.1 "
            "B2.1 SB2.1 RB3.1 B3.1 SB3.1 RB2.0 B2.0 RB3.0 B3.0");
}

TEST(PipelineSchedule, RejectsShapesMegatronRejects) {
  EXPECT_THROW(pipeline_schedule({2, 2, 3, 0}, 0), Error);  // G = P = 2, M = 3: 3 % 2 = 1 < P
  EXPECT_THROW(pipeline_schedule({4, 2, 2, 0}, 0), Error);  // M < G = P
  EXPECT_THROW(pipeline_schedule({1, 2, 4, 0}, 0), Error);  // virtual stages need P >= 2
  EXPECT_NO_THROW(pipeline_schedule({2, 2, 5, 3}, 1));      // 5 % 3 = 2 >= P
}

// ---- simulation of every stage with blocking batched exchanges (Megatron's semantics) ----

struct Transfer {
  int from, to;
  bool forward;
  int microbatch, chunk;  // of the activation or gradient as the sender names it
};

// The (microbatch, chunk) the receiver names for a transfer from stage `from` to stage `to`.
std::pair<int, int> as_received(const Transfer& t, int stages) {
  if (t.forward && t.to == 0 && t.from == stages - 1) return {t.microbatch, t.chunk + 1};
  if (!t.forward && t.to == stages - 1 && t.from == 0) return {t.microbatch, t.chunk - 1};
  return {t.microbatch, t.chunk};
}

void simulate(const PipelineShape& shape) {
  SCOPED_TRACE(::testing::Message() << "P=" << shape.stages << " V=" << shape.chunks << " M=" << shape.microbatches);
  const int P = shape.stages;
  std::vector<std::vector<PipelineEvent>> lists;
  for (int r = 0; r < P; ++r) lists.push_back(pipeline_schedule(shape, r));
  std::vector<std::size_t> pos(static_cast<std::size_t>(P), 0);
  // Posted sends per (from, to, forward), FIFO; receives match them in order.
  std::map<std::tuple<int, int, bool>, std::deque<Transfer>> sent;
  std::map<std::tuple<int, int, bool>, int> received_count, sent_count;
  std::vector<std::set<std::pair<int, int>>> have_input(static_cast<std::size_t>(P)), have_grad(static_cast<std::size_t>(P)),
      done_forward(static_cast<std::size_t>(P)), done_backward(static_cast<std::size_t>(P));
  std::vector<std::vector<std::pair<int, int>>> pending_sends(static_cast<std::size_t>(P));
  std::vector<bool> sends_posted(static_cast<std::size_t>(P), false);
  auto is_transfer = [](PipelineOp op) { return op != PipelineOp::kForward && op != PipelineOp::kBackward; };
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < P; ++r) {
      auto& list = lists[static_cast<std::size_t>(r)];
      std::size_t& i = pos[static_cast<std::size_t>(r)];
      if (i >= list.size()) continue;
      const PipelineEvent& e = list[i];
      const std::pair<int, int> mc{e.microbatch, e.chunk};
      if (!is_transfer(e.op)) {
        const bool first_virtual = r == 0 && e.chunk == 0, last_virtual = r == P - 1 && e.chunk == shape.chunks - 1;
        if (e.op == PipelineOp::kForward) {
          ASSERT_TRUE(first_virtual || have_input[static_cast<std::size_t>(r)].count(mc)) << "stage " << r << " " << to_string(e, true) << " before its input";
          ASSERT_TRUE(done_forward[static_cast<std::size_t>(r)].insert(mc).second) << "stage " << r << " repeats " << to_string(e, true);
        } else {
          ASSERT_TRUE(done_forward[static_cast<std::size_t>(r)].count(mc)) << "stage " << r << " " << to_string(e, true) << " before its forward";
          ASSERT_TRUE(last_virtual || have_grad[static_cast<std::size_t>(r)].count(mc)) << "stage " << r << " " << to_string(e, true) << " before its gradient";
          ASSERT_TRUE(done_backward[static_cast<std::size_t>(r)].insert(mc).second);
        }
        ++i;
        progress = true;
        continue;
      }
      // An exchange: the run of transfers starting at i. Post its sends once, then complete when
      // every receive has a matching send and every send has been received (rendezvous).
      std::size_t end = i;
      while (end < list.size() && is_transfer(list[end].op)) ++end;
      if (!sends_posted[static_cast<std::size_t>(r)]) {
        for (std::size_t j = i; j < end; ++j) {
          const PipelineEvent& t = list[j];
          if (t.op != PipelineOp::kSendForward && t.op != PipelineOp::kSendBackward) continue;
          const bool fwd = t.op == PipelineOp::kSendForward;
          const int to = fwd ? (r + 1) % P : (r + P - 1) % P;
          sent[{r, to, fwd}].push_back({r, to, fwd, t.microbatch, t.chunk});
          ++sent_count[{r, to, fwd}];
        }
        sends_posted[static_cast<std::size_t>(r)] = true;
        progress = true;
      }
      bool ready = true;
      std::map<std::tuple<int, int, bool>, int> wanted;
      for (std::size_t j = i; j < end; ++j) {
        const PipelineEvent& t = list[j];
        if (t.op == PipelineOp::kRecvForward || t.op == PipelineOp::kRecvBackward) {
          const bool fwd = t.op == PipelineOp::kRecvForward;
          const int from = fwd ? (r + P - 1) % P : (r + 1) % P;
          const int n = ++wanted[{from, r, fwd}];
          if (static_cast<int>(sent[{from, r, fwd}].size()) < n) ready = false;
        }
      }
      if (!ready) continue;
      for (std::size_t j = i; j < end; ++j) {
        const PipelineEvent& t = list[j];
        if (t.op != PipelineOp::kRecvForward && t.op != PipelineOp::kRecvBackward) continue;
        const bool fwd = t.op == PipelineOp::kRecvForward;
        const int from = fwd ? (r + P - 1) % P : (r + 1) % P;
        const Transfer got = sent[{from, r, fwd}].front();
        sent[{from, r, fwd}].pop_front();
        ++received_count[{from, r, fwd}];
        ASSERT_EQ(as_received(got, P), std::make_pair(t.microbatch, t.chunk))
            << "stage " << r << " " << to_string(t, true) << " met the send of (" << got.microbatch << ", " << got.chunk
            << ") from stage " << from;
        (fwd ? have_input : have_grad)[static_cast<std::size_t>(r)].insert({t.microbatch, t.chunk});
      }
      i = end;
      sends_posted[static_cast<std::size_t>(r)] = false;
      progress = true;
    }
  }
  for (int r = 0; r < P; ++r) {
    ASSERT_EQ(pos[static_cast<std::size_t>(r)], lists[static_cast<std::size_t>(r)].size())
        << "deadlock: stage " << r << " stuck at event " << pos[static_cast<std::size_t>(r)] << " ("
        << to_string(lists[static_cast<std::size_t>(r)][pos[static_cast<std::size_t>(r)]], true) << ")";
    EXPECT_EQ(done_forward[static_cast<std::size_t>(r)].size(), static_cast<std::size_t>(shape.microbatches * shape.chunks));
    EXPECT_EQ(done_backward[static_cast<std::size_t>(r)].size(), static_cast<std::size_t>(shape.microbatches * shape.chunks));
  }
  for (const auto& [key, queue] : sent) EXPECT_TRUE(queue.empty()) << "unreceived sends";
  if (shape.chunks == 1) {
    for (int r = 0; r < P; ++r) {
      int in_flight = 0, most = 0;
      for (const PipelineEvent& e : lists[static_cast<std::size_t>(r)]) {
        if (e.op == PipelineOp::kForward) most = std::max(most, ++in_flight);
        if (e.op == PipelineOp::kBackward) --in_flight;
      }
      EXPECT_LE(most, std::min(P - r, shape.microbatches)) << "stage " << r;
    }
  }
}

TEST(PipelineSchedule, OneFOneBStagesMeetWithoutDeadlock) {
  simulate({4, 1, 8, 0});
  simulate({2, 1, 3, 0});
  simulate({4, 1, 2, 0});
}

TEST(PipelineSchedule, InterleavedStagesMeetWithoutDeadlock) {
  simulate({2, 2, 4, 0});
  simulate({4, 2, 8, 0});
  simulate({4, 4, 8, 0});
  simulate({2, 2, 5, 3});
  simulate({4, 2, 4, 0});  // all warm-up on the first stages
}

TEST(PipelineSchedule, ForwardOnlyRunsTheInterleavedOrder) {
  EXPECT_EQ(to_string(forward_only_schedule({2, 2, 2, 0}, 0), true),
            "F0.0 SF0.0 F1.0 SF1.0 RF0.1 F0.1 SF0.1 RF1.1 F1.1 SF1.1");
  EXPECT_EQ(to_string(forward_only_schedule({2, 2, 2, 0}, 1), true),
            "RF0.0 F0.0 SF0.0 RF1.0 F1.0 SF1.0 RF0.1 F0.1 RF1.1 F1.1");
  EXPECT_EQ(to_string(forward_only_schedule({3, 1, 2, 0}, 1), false), "RF0 F0 SF0 RF1 F1 SF1");
}

std::string layer_map(const PipelineLayout& l) {
  std::string out;
  for (int r = 0; r < l.stages; ++r) {
    out += (r ? " | " : "");
    for (int c = 0; c < l.chunks; ++c) {
      const auto range = l.layers(r, c);
      out += str_cat(c ? " " : "", range.first, "+", range.count);
    }
  }
  return out;
}

TEST(PipelineLayout, EvenInterleavedAndUnevenSplitsAsMegatron) {
  // Spec 9.2.6: chunk c on stage r starts at c * L/V + r * L/(P*V).
  EXPECT_EQ(layer_map({8, 2, 2, std::nullopt, std::nullopt}), "0+2 4+2 | 2+2 6+2");
  EXPECT_EQ(layer_map({8, 4, 1, std::nullopt, std::nullopt}), "0+2 | 2+2 | 4+2 | 6+2");
  EXPECT_EQ(layer_map({6, 1, 1, std::nullopt, std::nullopt}), "0+6");
  // Uneven: first and last stages one layer each, the other four split over the middle two.
  EXPECT_EQ(layer_map({6, 4, 1, 1, 1}), "0+1 | 1+2 | 3+2 | 5+1");
  // Only the first given: the rest split over the others.
  EXPECT_EQ(layer_map({7, 3, 1, 1, std::nullopt}), "0+1 | 1+3 | 4+3");
  // Uneven and interleaved: per chunk 1 (first), 2 (middle), 1 (last) layers; rounds of 6.
  EXPECT_EQ(layer_map({12, 4, 2, 2, 2}), "0+1 6+1 | 1+2 7+2 | 3+2 9+2 | 5+1 11+1");
}

TEST(PipelineLayout, ReportsEveryProblem) {
  EXPECT_EQ(PipelineLayout({6, 4, 1, std::nullopt, std::nullopt}).validate().size(), 1u);
  EXPECT_EQ(PipelineLayout({8, 2, 3, std::nullopt, std::nullopt}).validate().size(), 1u);
  EXPECT_EQ(PipelineLayout({7, 4, 1, 1, 1}).validate().size(), 1u);  // 5 over 2 middle stages
  EXPECT_EQ(PipelineLayout({8, 4, 2, 1, 3}).validate().size(), 2u);  // 1 and 3 not divisible by 2
  EXPECT_EQ(PipelineLayout({8, 1, 1, 2, std::nullopt}).validate().size(), 1u);
  EXPECT_TRUE(PipelineLayout({12, 4, 2, 2, 2}).validate().empty());
}

}  // namespace
}  // namespace megatron::parallel
