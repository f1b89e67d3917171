// How Megatron divides data between train / valid / test (spec 4.2) and reads --data-path
// blends (spec 4.9): the --split string to book-ends, book-ends to sequence ranges (Python's
// round-half-even), the "w1 p1 w2 p2" list to prefixes and weights, and numpy's float64
// normalisation (numpy.sum's pairwise order, so weights are bit-identical to Megatron's).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "megatron/data/python_json.h"

namespace megatron::data {

enum class Split : std::uint8_t { kTrain = 0, kValid = 1, kTest = 2 };
inline constexpr std::array<Split, 3> kAllSplits = {Split::kTrain, Split::kValid, Split::kTest};

// Megatron's Split enum names: "train", "valid", "test".
const char* split_name(Split split);

// One split's book-ends as fractions of the low-level dataset, [begin, end).
struct SplitRange {
  double begin = 0.0;
  double end = 1.0;
  bool begin_is_int = false;  // Python's literal 0 (first book-end), printed "0" not "0.0"
};

// Per split (train, valid, test): its book-ends, or none when the split is empty.
using SplitMatrix = std::array<std::optional<SplitRange>, 3>;

// Megatron's default --split when --data-path is given without one, and mock data's split.
inline constexpr const char* kDefaultSplit = "969, 30, 1";
inline constexpr const char* kMockSplit = "1,1,1";

// parse_and_normalize_split + convert_split_vector_to_split_matrix: every "[.0-9]+" run as a
// float, padded with zeros to three, normalised; a split whose end <= begin is empty. Throws
// megatron::Error naming --split for more than three numbers, a number Python's float()
// rejects ("1.2.3"), or weights that sum to zero.
SplitMatrix parse_split(const std::string& split);

// The split matrix as Megatron prints it into descriptions: [[0, 0.969], [0.969, 0.999], null].
PyJson split_matrix_json(const SplitMatrix& matrix);

// The sequence ids [begin, end) of a split over a low-level dataset of `num_elements`
// sequences: int(round(book-end * float(num_elements))).
struct IndexRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
};
IndexRange split_index_range(const SplitRange& range, std::int64_t num_elements);

// numpy.sum over float64 values (pairwise summation with 8 accumulators, as numpy 2.x).
double numpy_sum(std::span<const double> values);

// Megatron's normalize(): values / numpy.sum(values), elementwise in float64.
std::vector<double> normalize_weights(std::span<const double> values);

// A --data-path style list split into prefixes and optional weights (get_blend_from_list).
struct Blend {
  std::vector<std::string> prefixes;
  std::optional<std::vector<double>> weights;
};

// Odd length: all prefixes. Even length: every other element is a weight when all of them
// parse as Python floats, otherwise all elements are prefixes. Prefixes are stripped of
// surrounding whitespace. Throws when a parsed weight is negative, zero or not finite (naming
// `flag`), or the list is empty.
Blend parse_blend(const std::vector<std::string>& items, const std::string& flag);

}  // namespace megatron::data
