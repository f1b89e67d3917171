// GPTDataset.__getitem__ and _get_ltor_masks_and_position_ids without tensors (see
// gpt_sample.h).
#include "megatron/data/gpt_sample.h"

#include "megatron/core/check.h"

namespace megatron::data {

void make_sample(std::span<const std::int64_t> text, const SampleOptions& options,
                 const SampleBuffers& out) {
  const std::size_t s = out.tokens.size();
  MEGATRON_ASSERT(out.labels.size() == s && out.loss_mask.size() == s &&
                  out.position_ids.size() == s);
  MEGATRON_ASSERT(text.size() == s + (options.add_extra_token ? 1 : 0), "text of ", text.size(),
                  " ids for a sample of ", s);
  for (std::size_t i = 0; i < s; ++i) {
    out.tokens[i] = text[i];
    if (options.add_extra_token) {
      out.labels[i] = text[i + 1];
    } else {
      out.labels[i] = i + 1 < s ? text[i + 1] : options.pad;
    }
  }
  if (out.segment_starts != nullptr) out.segment_starts->clear();
  std::int64_t position = 0;
  for (std::size_t i = 0; i < s; ++i) {
    const bool is_eod = out.tokens[i] == options.eod;
    out.loss_mask[i] = options.eod_mask_loss && is_eod ? 0.0f : 1.0f;
    out.position_ids[i] = options.reset_position_ids ? position : static_cast<std::int64_t>(i);
    ++position;
    if (is_eod) {
      position = 0;
      if (out.segment_starts != nullptr && i + 1 < s) {
        out.segment_starts->push_back(static_cast<std::int32_t>(i + 1));
      }
    }
  }
  for (std::size_t i = 0; i < s; ++i) {
    if (out.labels[i] == options.pad) out.loss_mask[i] = 0.0f;
    if (out.tokens[i] == options.pad) out.tokens[i] = 0;
    if (out.labels[i] == options.pad) out.labels[i] = 0;
  }
}

}  // namespace megatron::data
