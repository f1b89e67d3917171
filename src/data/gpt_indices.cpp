// GPTDataset index algorithms (see gpt_indices.h); step for step as gpt_dataset.py and
// helpers.cpp, checked against an independent numpy implementation in the tests.
#include "megatron/data/gpt_indices.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "megatron/core/check.h"

namespace megatron::data {
namespace {

// An empty vector with room for `count` values on transparent huge pages where the kernel
// offers them (madvise mode): a shuffle's random swaps over hundreds of megabytes then miss the
// TLB far less. Called before the first touch, so the pages are huge from the start.
template <typename T>
std::vector<T> huge_page_vector(std::size_t count) {
  std::vector<T> values;
  values.reserve(count);
#ifdef MADV_HUGEPAGE
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  const auto begin = (reinterpret_cast<std::uintptr_t>(values.data()) + kHuge - 1) & ~(kHuge - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(values.data() + count)) & ~(kHuge - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#endif
  return values;
}

template <typename T>
std::vector<T> sample_rows(std::span<const DocumentEntry> entries, std::int32_t sequence_length,
                           std::int64_t num_samples, std::int32_t add_extra_token) {
  std::vector<T> rows(2 * static_cast<std::size_t>(num_samples + 1));
  std::int64_t row = 0;
  T position = 0;  // into the document index
  T offset = 0;    // token offset in that sequence
  rows[0] = position;
  rows[1] = offset;
  ++row;
  const std::int64_t last = static_cast<std::int64_t>(entries.size()) - 1;
  const auto length_at = [&](T at) {
    return static_cast<std::int64_t>(entry_length(entries[static_cast<std::size_t>(at)]));
  };
  while (row <= num_samples) {
    std::int64_t remaining = sequence_length + add_extra_token;
    while (remaining != 0) {
      const std::int64_t length = length_at(position) - static_cast<std::int64_t>(offset);
      remaining -= length;
      if (remaining <= 0) {
        offset = static_cast<T>(offset + remaining + length - add_extra_token);
        remaining = 0;
      } else {
        if (static_cast<std::int64_t>(position) == last) {
          offset = static_cast<T>(length_at(position) - add_extra_token);
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

// arange(num_samples) shuffled, then arange(num_samples, total_size) shuffled, in one array.
template <typename T>
IndexArray shuffle_index_of(std::uint64_t num_samples, std::uint64_t total_size,
                            RandomState& random) {
  std::vector<T> values = huge_page_vector<T>(total_size);
  for (std::uint64_t i = 0; i < total_size; ++i) values.push_back(static_cast<T>(i));
  const std::span<T> all(values);
  random.shuffle(all.first(num_samples));
  if (num_samples != total_size) random.shuffle(all.subspan(num_samples));
  return IndexArray::from_vector(std::move(values));
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

std::vector<DocumentEntry> build_document_index(UnalignedArray<std::int32_t> sequence_lengths,
                                               std::int64_t begin, std::int64_t end,
                                               std::int64_t num_epochs, RandomState& random,
                                               bool separate_final_epoch) {
  MEGATRON_ASSERT(0 <= begin && begin <= end &&
                  end <= static_cast<std::int64_t>(sequence_lengths.size()) && num_epochs > 0);
  const auto per_epoch = static_cast<std::size_t>(end - begin);
  std::vector<DocumentEntry> entries =
      huge_page_vector<DocumentEntry>(per_epoch * static_cast<std::size_t>(num_epochs));
  for (std::int64_t sequence = begin; sequence < end; ++sequence) {
    entries.push_back(document_entry(static_cast<std::int32_t>(sequence),
                                     sequence_lengths[static_cast<std::size_t>(sequence)]));
  }
  for (std::int64_t epoch = 1; epoch < num_epochs; ++epoch) {
    entries.insert(entries.end(), entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(per_epoch));
  }
  const std::span<DocumentEntry> all(entries);
  if (!separate_final_epoch || num_epochs == 1) {
    random.shuffle(all);
  } else {
    const std::size_t final_epoch = per_epoch * static_cast<std::size_t>(num_epochs - 1);
    random.shuffle(all.first(final_epoch));
    random.shuffle(all.subspan(final_epoch));
  }
  return entries;
}

IndexArray document_index_of(std::span<const DocumentEntry> entries) {
  std::vector<std::int32_t> sequences(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) sequences[i] = entry_sequence(entries[i]);
  return IndexArray::from_vector(std::move(sequences));
}

IndexArray build_sample_index(std::span<const DocumentEntry> entries, std::int32_t sequence_length,
                              std::int64_t num_epochs, std::int64_t tokens_per_epoch,
                              bool drop_last_partial_sequence, std::int32_t add_extra_token) {
  MEGATRON_ASSERT(sequence_length > 1 && num_epochs > 0 && tokens_per_epoch > 1);
  MEGATRON_ASSERT(!entries.empty());
  const std::int64_t tokens = num_epochs * tokens_per_epoch - add_extra_token;
  std::int64_t num_samples = 0;
  if (drop_last_partial_sequence) {
    num_samples = tokens / sequence_length;
  } else {
    num_samples = static_cast<std::int64_t>(
        std::ceil(static_cast<float>(tokens) / static_cast<float>(sequence_length)));
  }
  // Megatron picks int32 when max(len(document_index), max(sequence_lengths)) fits int32; the
  // lengths are int32 themselves, so only the document index's length decides.
  const std::vector<std::uint64_t> shape = {static_cast<std::uint64_t>(num_samples + 1), 2};
  if (entries.size() <= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    return IndexArray::from_vector(
        sample_rows<std::int32_t>(entries, sequence_length, num_samples, add_extra_token), shape);
  }
  return IndexArray::from_vector(
      sample_rows<std::int64_t>(entries, sequence_length, num_samples, add_extra_token), shape);
}

IndexArray build_shuffle_index(std::uint64_t num_samples, std::uint64_t total_size,
                               RandomState& random) {
  if (total_size >= std::numeric_limits<std::uint32_t>::max() - 1ULL) {
    return shuffle_index_of<std::int64_t>(num_samples, total_size, random);
  }
  return shuffle_index_of<std::uint32_t>(num_samples, total_size, random);
}

}  // namespace megatron::data
