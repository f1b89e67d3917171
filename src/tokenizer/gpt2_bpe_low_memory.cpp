// BPE of very long pieces (a whitespace-free run of megabytes) in about 8 bytes per byte and
// O(n log n) time, with the reference's result: each round merges every occurrence of the
// lowest-rank pair, left to right. Memory: the word as spans (4 bytes + 1 bit per byte) and, per
// rank, the positions where that pair may stand (4 bytes per pair, stale entries pruned).
#include <algorithm>
#include <climits>
#include <functional>
#include <queue>

#include "megatron/core/check.h"
#include "megatron/tokenizer/gpt2_bpe_tokenizer.h"

namespace megatron::tokenizer {
namespace {

// The word as spans of the piece's bytes. A span [i, e) is alive at i, whose slot holds its
// symbol; its other slots are free, so slot[i + 1] holds e (when e > i + 2) and slot[e - 1] holds
// i: next() and prev() are O(1) without link arrays. Positions and n fit in 32 bits.
class SpanWord {
 public:
  explicit SpanWord(std::size_t n) : slot_(n), alive_(n, true), n_(static_cast<std::uint32_t>(n)) {}

  std::uint32_t end() const { return n_; }
  bool alive(std::uint32_t i) const { return alive_[i]; }
  std::int32_t symbol(std::uint32_t i) const { return static_cast<std::int32_t>(slot_[i]); }
  void set_symbol(std::uint32_t i, std::int32_t s) { slot_[i] = static_cast<std::uint32_t>(s); }

  // Start of the span after the live span at i, or end().
  std::uint32_t next(std::uint32_t i) const {
    const std::uint32_t j = i + 1;
    if (j >= n_ || alive_[j]) return j;
    const std::uint32_t v = slot_[j];
    return v > j ? v : i + 2;  // slot[i + 1] holds i for a span of two bytes
  }
  // Start of the span before the live span at i; false at the first span.
  bool prev(std::uint32_t i, std::uint32_t& p) const {
    if (i == 0) return false;
    const std::uint32_t k = i - 1;
    p = alive_[k] ? k : slot_[k];
    return true;
  }
  // Joins the live span at i with the next one, at j, into one span holding `symbol`.
  void join(std::uint32_t i, std::uint32_t j, std::int32_t symbol) {
    const std::uint32_t e = next(j);
    alive_[j] = false;
    slot_[i] = static_cast<std::uint32_t>(symbol);
    if (e - i == 2) {
      slot_[i + 1] = i;
    } else {
      slot_[i + 1] = e;
      slot_[e - 1] = i;
    }
  }

 private:
  std::vector<std::uint32_t> slot_;
  std::vector<bool> alive_;
  std::uint32_t n_;
};

}  // namespace

void Gpt2BpeTokenizer::bpe_low_memory(std::string_view piece, std::vector<std::int32_t>& out) const {
  const std::size_t n = piece.size();
  MEGATRON_CHECK(n < UINT32_MAX, "a piece of ", n, " bytes without whitespace is too long to tokenize (at most ",
                 UINT32_MAX - 1, ")");
  SpanWord word(n);
  for (std::uint32_t i = 0; i < n; ++i) word.set_symbol(i, byte_symbol_[static_cast<unsigned char>(piece[i])]);

  // Per rank, the positions where that pair stood when it was queued; checked when its round comes.
  std::vector<std::vector<std::uint32_t>> at_rank(num_merges_);
  std::vector<bool> queued(num_merges_, false);
  std::priority_queue<std::int32_t, std::vector<std::int32_t>, std::greater<>> ranks;
  std::size_t pending = 0;  // entries in at_rank
  std::size_t live = n;     // spans
  auto rank_at = [&](std::uint32_t i, std::int32_t& result) {
    const std::uint32_t j = word.next(i);
    return j >= word.end() ? INT32_MAX : merge_rank(word.symbol(i), word.symbol(j), result);
  };
  auto add = [&](std::uint32_t i) {
    std::int32_t result = -1;
    const std::int32_t r = rank_at(i, result);
    if (r == INT32_MAX) return;
    at_rank[static_cast<std::size_t>(r)].push_back(i);
    ++pending;
    if (!queued[static_cast<std::size_t>(r)]) {
      queued[static_cast<std::size_t>(r)] = true;
      ranks.push(r);
    }
  };
  // Every pair of the word, each list sized exactly (a count pass first), no stale entries.
  auto rebuild = [&] {
    std::vector<std::uint32_t> counts(num_merges_, 0);
    std::int32_t result = -1;
    for (std::uint32_t i = 0; i < word.end(); i = word.next(i)) {
      const std::int32_t r = rank_at(i, result);
      if (r != INT32_MAX) ++counts[static_cast<std::size_t>(r)];
    }
    ranks = {};
    pending = 0;
    for (std::size_t r = 0; r < num_merges_; ++r) {
      std::vector<std::uint32_t>().swap(at_rank[r]);
      at_rank[r].reserve(counts[r]);
      queued[r] = false;
    }
    for (std::uint32_t i = 0; i < word.end(); i = word.next(i)) add(i);
  };

  rebuild();
  while (!ranks.empty()) {
    const std::int32_t r = ranks.top();
    ranks.pop();
    queued[static_cast<std::size_t>(r)] = false;
    std::vector<std::uint32_t> positions = std::move(at_rank[static_cast<std::size_t>(r)]);
    at_rank[static_cast<std::size_t>(r)] = {};
    pending -= positions.size();
    std::sort(positions.begin(), positions.end());
    positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
    // Left to right, as the reference's pass: a position merged into its left neighbour is dead.
    // Pairs made here never have rank r (the merged symbol is longer than both halves).
    // The new pair at i is queued now unless the next span merges in this round too (it then
    // queues i as its left neighbour), which keeps stale entries out of runs like "aaaa".
    for (const std::uint32_t i : positions) {
      std::int32_t result = -1;
      if (!word.alive(i) || rank_at(i, result) != r) continue;
      word.join(i, word.next(i), result);
      --live;
      std::uint32_t p = 0;
      if (word.prev(i, p)) add(p);
      const std::uint32_t j = word.next(i);
      if (j >= word.end() || rank_at(j, result) != r) add(i);
    }
    // Stale entries cost memory only: drop them once they are a third of the lists.
    if (pending > live + live / 2 + 64) rebuild();
  }
  out.reserve(out.size() + live);  // no growth by doubling for millions of tokens
  for (std::uint32_t i = 0; i < word.end(); i = word.next(i)) emit(word.symbol(i), piece, out);
}

}  // namespace megatron::tokenizer
