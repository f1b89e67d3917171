// The per-sample outputs of Megatron's GPTDataset.__getitem__ (spec 4.7) into caller buffers:
// tokens, labels, loss mask and position ids from the sample's S + 1 token ids, plus the
// document boundaries the trainer needs for --reset-attention-mask. No tensors: the trainer
// owns the memory (pinned on GPU builds) and builds the attention mask from the boundaries.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace megatron::data {

struct SampleOptions {
  std::int64_t eod = 0;
  std::int64_t pad = -1;              // Megatron's pad id (-1 when the tokenizer has none usable)
  bool reset_position_ids = false;    // --reset-position-ids
  bool reset_attention_mask = false;  // --reset-attention-mask (boundaries reported)
  bool eod_mask_loss = false;         // --eod-mask-loss
  bool add_extra_token = true;        // add_extra_token_to_sequence
};

// Caller-owned outputs, each of sequence-length S elements (segment_starts optional).
struct SampleBuffers {
  std::span<std::int64_t> tokens;
  std::span<std::int64_t> labels;
  std::span<float> loss_mask;
  std::span<std::int64_t> position_ids;
  // Cleared, then filled with the positions p in (0, S) where a new document starts (the token
  // before p is an EOD). Attention is causal within [start_k, start_{k+1}) blocks; with
  // --reset-attention-mask a query never sees keys of an earlier block. Null: not wanted.
  std::vector<std::int32_t>* segment_starts = nullptr;
};

// From `text` (S + 1 ids with add_extra_token, else S): tokens = text[:S], labels = text[1:]
// (or text shifted left with the pad id last); loss_mask 1, 0 at EOD tokens with eod_mask_loss
// and where the label is the pad id; position ids 0..S-1, restarting after each EOD with
// reset_position_ids; pad ids in tokens and labels replaced by 0.
void make_sample(std::span<const std::int64_t> text, const SampleOptions& options,
                 const SampleBuffers& out);

}  // namespace megatron::data
