// The index algorithms of Megatron's GPTDataset (spec 4.3-4.6): epochs and the
// separate-final-epoch rule, the shuffled document index, the sample index (helpers.cpp
// build_sample_idx) and the shuffle index, all drawing from one numpy RandomState in
// Megatron's order. Pure functions over arrays; caching lives in gpt_dataset.h.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "megatron/data/npy.h"
#include "megatron/data/numpy_random.h"
#include "megatron/data/unaligned_array.h"

namespace megatron::data {

struct EpochPlan {
  std::int64_t num_epochs = 1;
  bool separate_final_epoch = false;
  // Samples covered by the first num_epochs - 1 epochs (only meaningful when separated).
  std::int64_t num_samples_sans_final_epoch = 0;
};

// Spec 4.3. `num_samples` none = one epoch. `add_extra_token` is Megatron's
// add_extra_token_to_sequence (1 for GPT pretraining). Throws when the split holds fewer tokens
// than one sample needs.
EpochPlan plan_epochs(std::int64_t tokens_per_epoch, std::optional<std::int64_t> num_samples,
                      std::int32_t sequence_length, std::int32_t add_extra_token);

// Spec 4.4: `documents` (the split's sequence ids) repeated per epoch, epoch-major, as int32,
// shuffled in place; with separate_final_epoch the first num_epochs - 1 epochs and the final
// epoch are shuffled separately and concatenated.
std::vector<std::int32_t> build_document_index(std::span<const std::int32_t> documents,
                                               std::int64_t num_epochs, RandomState& random,
                                               bool separate_final_epoch);

// Spec 4.5: rows (document-index position, token offset), [num_samples + 1, 2] row-major.
// int32 when max(len(document_index), max(sequence_lengths)) fits int32, else int64 (helpers.py).
// With drop_last_partial_sequence false the count is ceil in float32, as helpers.cpp computes it.
IndexArray build_sample_index(UnalignedArray<std::int32_t> sequence_lengths,
                              std::span<const std::int32_t> document_index,
                              std::int32_t sequence_length, std::int64_t num_epochs,
                              std::int64_t tokens_per_epoch, bool drop_last_partial_sequence,
                              std::int32_t add_extra_token);

// Spec 4.6: arange(num_samples) shuffled, then (when total_size > num_samples)
// arange(num_samples, total_size) shuffled, concatenated; uint32 unless total_size >= 2^32 - 2,
// then int64.
IndexArray build_shuffle_index(std::uint64_t num_samples, std::uint64_t total_size,
                               RandomState& random);

}  // namespace megatron::data
