// GPTDataset index algorithms (see gpt_indices.h); step for step as gpt_dataset.py and
// helpers.cpp, checked against an independent numpy implementation in the tests.
#include "megatron/data/gpt_indices.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "megatron/core/check.h"

namespace megatron::data {
namespace {

template <typename T>
std::vector<T> sample_rows(UnalignedArray<std::int32_t> sizes,
                           std::span<const std::int32_t> document_index,
                           std::int32_t sequence_length, std::int64_t num_samples,
                           std::int32_t add_extra_token) {
  std::vector<T> rows(2 * static_cast<std::size_t>(num_samples + 1));
  std::int64_t row = 0;
  T position = 0;  // into document_index
  T offset = 0;    // token offset in that sequence
  rows[0] = position;
  rows[1] = offset;
  ++row;
  const std::int64_t last = static_cast<std::int64_t>(document_index.size()) - 1;
  while (row <= num_samples) {
    std::int64_t remaining = sequence_length + add_extra_token;
    while (remaining != 0) {
      const std::int64_t length =
          sizes[static_cast<std::size_t>(document_index[static_cast<std::size_t>(position)])] -
          static_cast<std::int64_t>(offset);
      remaining -= length;
      if (remaining <= 0) {
        offset = static_cast<T>(offset + remaining + length - add_extra_token);
        remaining = 0;
      } else {
        if (static_cast<std::int64_t>(position) == last) {
          offset = static_cast<T>(
              sizes[static_cast<std::size_t>(document_index[static_cast<std::size_t>(position)])] -
              add_extra_token);
          break;
        }
        ++position;
        offset = 0;
      }
    }
    rows[2 * static_cast<std::size_t>(row)] = position;
    rows[2 * static_cast<std::size_t>(row) + 1] = offset;
    ++row;
  }
  return rows;
}

template <typename T>
std::vector<T> shuffled_range(std::uint64_t begin, std::uint64_t end, RandomState& random) {
  std::vector<T> values(end - begin);
  for (std::uint64_t i = 0; i < values.size(); ++i) values[i] = static_cast<T>(begin + i);
  random.shuffle(std::span<T>(values));
  return values;
}

template <typename T>
IndexArray shuffle_index_of(std::uint64_t num_samples, std::uint64_t total_size,
                            RandomState& random) {
  std::vector<T> first = shuffled_range<T>(0, num_samples, random);
  if (num_samples != total_size) {
    const std::vector<T> last = shuffled_range<T>(num_samples, total_size, random);
    first.insert(first.end(), last.begin(), last.end());
  }
  return IndexArray::from_vector(std::move(first));
}

}  // namespace

EpochPlan plan_epochs(std::int64_t tokens_per_epoch, std::optional<std::int64_t> num_samples,
                      std::int32_t sequence_length, std::int32_t add_extra_token) {
  EpochPlan plan;
  MEGATRON_CHECK(tokens_per_epoch > 1, "the split holds ", tokens_per_epoch,
                 " tokens, too few to build samples from; give the split more documents");
  if (!num_samples.has_value()) return plan;
  const std::int64_t requested = *num_samples * sequence_length + add_extra_token;
  // E = smallest E >= 1 with E * T >= requested.
  plan.num_epochs =
      std::max<std::int64_t>(1, (requested + tokens_per_epoch - 1) / tokens_per_epoch);
  if (plan.num_epochs == 1) return plan;
  plan.num_samples_sans_final_epoch =
      ((plan.num_epochs - 1) * tokens_per_epoch - add_extra_token) / sequence_length;
  const std::int64_t from_final_epoch = *num_samples - plan.num_samples_sans_final_epoch;
  const std::int64_t per_epoch = (tokens_per_epoch - add_extra_token) / sequence_length;
  MEGATRON_ASSERT(from_final_epoch >= 0 && from_final_epoch <= per_epoch + 1);
  // Python: num_samples_from_final_epoch < int(0.80 * num_samples_per_epoch)
  plan.separate_final_epoch =
      from_final_epoch < static_cast<std::int64_t>(0.80 * static_cast<double>(per_epoch));
  return plan;
}

std::vector<std::int32_t> build_document_index(std::span<const std::int32_t> documents,
                                               std::int64_t num_epochs, RandomState& random,
                                               bool separate_final_epoch) {
  if (!separate_final_epoch || num_epochs == 1) {
    std::vector<std::int32_t> index;
    index.reserve(documents.size() * static_cast<std::size_t>(num_epochs));
    for (std::int64_t epoch = 0; epoch < num_epochs; ++epoch) {
      index.insert(index.end(), documents.begin(), documents.end());
    }
    random.shuffle(std::span<std::int32_t>(index));
    return index;
  }
  std::vector<std::int32_t> first = build_document_index(documents, num_epochs - 1, random, false);
  const std::vector<std::int32_t> last = build_document_index(documents, 1, random, false);
  first.insert(first.end(), last.begin(), last.end());
  return first;
}

IndexArray build_sample_index(UnalignedArray<std::int32_t> sequence_lengths,
                              std::span<const std::int32_t> document_index,
                              std::int32_t sequence_length, std::int64_t num_epochs,
                              std::int64_t tokens_per_epoch, bool drop_last_partial_sequence,
                              std::int32_t add_extra_token) {
  MEGATRON_ASSERT(sequence_length > 1 && num_epochs > 0 && tokens_per_epoch > 1);
  MEGATRON_ASSERT(!document_index.empty());
  const std::int64_t tokens = num_epochs * tokens_per_epoch - add_extra_token;
  std::int64_t num_samples = 0;
  if (drop_last_partial_sequence) {
    num_samples = tokens / sequence_length;
  } else {
    num_samples = static_cast<std::int64_t>(
        std::ceil(static_cast<float>(tokens) / static_cast<float>(sequence_length)));
  }
  std::int64_t max_value = static_cast<std::int64_t>(document_index.size());
  if (!sequence_lengths.empty()) {
    max_value = std::max<std::int64_t>(
        max_value, *std::max_element(sequence_lengths.begin(), sequence_lengths.end()));
  }
  const std::vector<std::uint64_t> shape = {static_cast<std::uint64_t>(num_samples + 1), 2};
  if (max_value <= std::numeric_limits<std::int32_t>::max()) {
    return IndexArray::from_vector(
        sample_rows<std::int32_t>(sequence_lengths, document_index, sequence_length, num_samples,
                                  add_extra_token),
        shape);
  }
  return IndexArray::from_vector(
      sample_rows<std::int64_t>(sequence_lengths, document_index, sequence_length, num_samples,
                                add_extra_token),
      shape);
}

IndexArray build_shuffle_index(std::uint64_t num_samples, std::uint64_t total_size,
                               RandomState& random) {
  if (total_size >= std::numeric_limits<std::uint32_t>::max() - 1ULL) {
    return shuffle_index_of<std::int64_t>(num_samples, total_size, random);
  }
  return shuffle_index_of<std::uint32_t>(num_samples, total_size, random);
}

}  // namespace megatron::data
