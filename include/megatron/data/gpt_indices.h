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

// One document-index entry with its sequence's length alongside (low 32 bits: the sequence id,
// high 32 bits: its length). The shuffle moves both together, with exactly the swaps numpy makes
// on the int32 document index, so the sample index then reads the lengths in order instead of
// gathering them at random from the .idx (a cache miss per document at 100M documents).
using DocumentEntry = std::uint64_t;
inline DocumentEntry document_entry(std::int32_t sequence, std::int32_t length) {
  return static_cast<std::uint32_t>(sequence) |
         (static_cast<DocumentEntry>(static_cast<std::uint32_t>(length)) << 32);
}
inline std::int32_t entry_sequence(DocumentEntry entry) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(entry));
}
inline std::int32_t entry_length(DocumentEntry entry) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(entry >> 32));
}

// Spec 4.4: the split's sequences [begin, end) repeated per epoch, epoch-major, shuffled in
// place; with separate_final_epoch the first num_epochs - 1 epochs and the final epoch are
// shuffled separately (in that order) and concatenated.
std::vector<DocumentEntry> build_document_index(UnalignedArray<std::int32_t> sequence_lengths,
                                               std::int64_t begin, std::int64_t end,
                                               std::int64_t num_epochs, RandomState& random,
                                               bool separate_final_epoch);

// The int32 document index Megatron saves: the sequence ids of `entries`.
IndexArray document_index_of(std::span<const DocumentEntry> entries);

// Spec 4.5: rows (document-index position, token offset), [num_samples + 1, 2] row-major.
// int32 when max(len(document_index), max(sequence_lengths)) fits int32, else int64 (helpers.py).
// With drop_last_partial_sequence false the count is ceil in float32, as helpers.cpp computes it.
IndexArray build_sample_index(std::span<const DocumentEntry> entries, std::int32_t sequence_length,
                              std::int64_t num_epochs, std::int64_t tokens_per_epoch,
                              bool drop_last_partial_sequence, std::int32_t add_extra_token);

// Spec 4.6: arange(num_samples) shuffled, then (when total_size > num_samples)
// arange(num_samples, total_size) shuffled, concatenated; uint32 unless total_size >= 2^32 - 2,
// then int64.
IndexArray build_shuffle_index(std::uint64_t num_samples, std::uint64_t total_size,
                               RandomState& random);

}  // namespace megatron::data
