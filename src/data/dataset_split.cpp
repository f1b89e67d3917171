// --split and --data-path parsing with Megatron's float arithmetic (see dataset_split.h).
#include "megatron/data/dataset_split.h"

#include <cctype>
#include <cmath>
#include <string_view>

#include "megatron/core/check.h"
#include "megatron/core/strings.h"

namespace megatron::data {
namespace {

std::string strip(const std::string& text) {
  std::size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return text.substr(begin, end - begin);
}

// numpy's pairwise_sum (numpy/_core/src/umath/loops_utils.h.src) for contiguous doubles.
double pairwise_sum(const double* a, std::size_t n) {
  if (n < 8) {
    double res = 0.0;
    for (std::size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int k = 0; k < 8; ++k) r[k] = a[k];
    std::size_t i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (int k = 0; k < 8; ++k) r[k] += a[i + static_cast<std::size_t>(k)];
    }
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  std::size_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

}  // namespace

const char* split_name(Split split) {
  switch (split) {
    case Split::kTrain:
      return "train";
    case Split::kValid:
      return "valid";
    case Split::kTest:
      break;
  }
  return "test";
}

SplitMatrix parse_split(const std::string& split) {
  std::vector<double> numbers;
  std::size_t i = 0;
  while (i < split.size()) {
    const auto is_part = [&](std::size_t k) {
      return split[k] == '.' || std::isdigit(static_cast<unsigned char>(split[k]));
    };
    if (!is_part(i)) {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < split.size() && is_part(end)) ++end;
    const std::string run = split.substr(i, end - i);
    const std::optional<double> value = parse_python_float(run);
    MEGATRON_CHECK(value.has_value(), "--split \"", split, "\": '", run,
                   "' is not a number; give up to three weights such as \"969,30,1\"");
    numbers.push_back(*value);
    i = end;
  }
  MEGATRON_CHECK(numbers.size() <= 3, "--split \"", split, "\" has ", numbers.size(),
                 " numbers; give at most three weights (train, valid, test)");
  numbers.resize(3, 0.0);
  MEGATRON_CHECK(numpy_sum(numbers) > 0.0, "--split \"", split,
                 "\": the weights sum to zero; give at least one positive weight");
  const std::vector<double> weights = normalize_weights(numbers);
  // Python: functools.reduce over [[0], *weights] -> [0, w0, w0 + w1, w0 + w1 + w2].
  const double bookends[4] = {0.0, weights[0], weights[0] + weights[1],
                              weights[0] + weights[1] + weights[2]};
  SplitMatrix matrix;
  for (std::size_t s = 0; s < 3; ++s) {
    if (bookends[s + 1] <= bookends[s]) continue;
    matrix[s] = SplitRange{bookends[s], bookends[s + 1], s == 0};
  }
  return matrix;
}

PyJson split_matrix_json(const SplitMatrix& matrix) {
  PyJson out{PyJson::List{}};
  for (const std::optional<SplitRange>& range : matrix) {
    if (!range.has_value()) {
      out.push_back(PyJson());
      continue;
    }
    PyJson pair{PyJson::List{}};
    pair.push_back(range->begin_is_int ? PyJson(static_cast<std::int64_t>(range->begin))
                                       : PyJson(range->begin));
    pair.push_back(PyJson(range->end));
    out.push_back(std::move(pair));
  }
  return out;
}

IndexRange split_index_range(const SplitRange& range, std::int64_t num_elements) {
  const double n = static_cast<double>(num_elements);
  // std::nearbyint in the default rounding mode is Python's round(): half to even.
  return {static_cast<std::int64_t>(std::nearbyint(range.begin * n)),
          static_cast<std::int64_t>(std::nearbyint(range.end * n))};
}

double numpy_sum(std::span<const double> values) {
  return 0.0 + pairwise_sum(values.data(), values.size());
}

std::vector<double> normalize_weights(std::span<const double> values) {
  const double total = numpy_sum(values);
  std::vector<double> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = values[i] / total;
  return out;
}

Blend parse_blend(const std::vector<std::string>& items, const std::string& flag) {
  MEGATRON_CHECK(!items.empty(), flag, " is empty; give dataset prefixes, optionally each ",
                 "preceded by its weight (\"30 path/a 70 path/b\")");
  Blend blend;
  bool weighted = items.size() % 2 == 0;
  std::vector<double> weights;
  for (std::size_t i = 0; weighted && i < items.size(); i += 2) {
    const std::optional<double> weight = parse_python_float(items[i]);
    if (!weight.has_value()) {
      weighted = false;
    } else {
      weights.push_back(*weight);
    }
  }
  if (!weighted) {
    for (const std::string& item : items) blend.prefixes.push_back(strip(item));
    return blend;
  }
  for (std::size_t i = 0; i < items.size(); i += 2) {
    const double weight = weights[i / 2];
    MEGATRON_CHECK(std::isfinite(weight) && weight > 0.0, flag, ": weight '", items[i],
                   "' of dataset ", strip(items[i + 1]), " must be a positive number");
    blend.prefixes.push_back(strip(items[i + 1]));
  }
  blend.weights = std::move(weights);
  return blend;
}

}  // namespace megatron::data
