// Megatron's three tokenizers over a SentencePiece model (--tokenizer-model, a .model file), run
// by the SentencePiece library itself as Megatron core_v0.12.0's tokenizer.py runs the Python one.
// Each call of the model is SentencePieceProcessor::Encode/Decode with default options (no
// sampling, no BOS/EOS of its own); N below is the model's piece count, id i the model's piece i.
//
// SentencePieceTokenizer: the pieces, then Megatron's "special tokens" added when the model lacks
// them, each at the next free id, in this order: <CLS> <SEP> <EOD> <MASK> (usually N..N+3); the
// pad piece, or <PAD> when the model has no pad (pad_id -1: a new id); the BOS and EOS pieces, or
// <BOS> / <EOS> when the model has none; <extra_id_0>.. for --vocab-extra-ids (preprocess_data
// keeps it 0, as Megatron's does). vocab_size counts the added tokens; EOD is the id of <EOD>, pad()
// the id of the pad token (the GPT dataset masks it out of the loss, as Megatron's does).
// Surprising: encoding finds the special tokens' text in the document (leftmost first, ties to
// the earlier-added token) and emits their ids, so the text "<s>" or "</s>" becomes the BOS or
// EOS id and "<EOD>" the EOD id; each stretch of text between them is encoded on its own (with
// SentencePiece's dummy-prefix space again). No BOS is added. Decoding puts the special tokens
// back as text with a space after each and after the text before each ("a </s> b").
//
// GPTSentencePieceTokenizer: SentencePiece's encoding of the whole text, nothing added (no BOS);
// vocab_size N; EOD is the model's EOS id (-1 when the model has none), pad() the model's pad id
// (none when it has none).
//
// Llama2Tokenizer: the BOS id, then SentencePiece's encoding: every text gets a BOS (in Megatron
// every document, and every sentence under --split-sentences); vocab_size N; EOD is the EOS id
// (-1 when none). A model without a BOS piece is refused here (Megatron would write id -1).
//
// In these two, special-token text is ordinary text (SentencePiece never matches control pieces
// such as <s> in text; user-defined pieces it matches itself). Decoding is SentencePiece's for all
// three: control pieces vanish, the unknown piece reads " ⁇ ", byte pieces <0xXX> become their
// bytes (a byte that does not complete a character, U+FFFD). Unigram models: Debian 12's library
// (0.1.97) and PyPI's sentencepiece 0.2.3 can break ties of the segmentation score differently
// (00|0 or 0|00; docs/data.md); BPE models agree.
// Thread safety: the processor is only read after loading (Encode and Decode are const), so one
// Tokenizer serves many threads, each through its own Encoder.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "megatron/tokenizer/tokenizer.h"

namespace megatron::tokenizer {

// Loads `model_path` as the tokenizer `type` ("SentencePieceTokenizer", "GPTSentencePieceTokenizer"
// or "Llama2Tokenizer": is_sentencepiece); `vocab_extra_ids` (>= 0)
// matters to SentencePieceTokenizer only, as in Megatron. Throws megatron::Error naming the file
// and --tokenizer-model when the file is missing, unreadable or not a SentencePiece model.
std::unique_ptr<Tokenizer> make_sentencepiece_tokenizer(std::string_view type, const std::string& model_path,
                                                         std::int64_t vocab_extra_ids = 0);

// The token texts a HuggingFace export names (hf_tokenizer_export.h). GPTSentencePieceTokenizer and
// Llama2Tokenizer: the model's unknown, BOS, EOS and pad pieces (empty when it has none).
// SentencePieceTokenizer: its BOS, EOS and pad special tokens, no unknown (Megatron never finds
// the unknown piece's text in a document), and all its special tokens in Megatron's order with
// their ids. Throws when `tokenizer` is not one of the three.
struct SentencePieceSpecialTokens {
  std::string unk, bos, eos, pad;
  std::vector<std::pair<std::string, std::int32_t>> added;
};
SentencePieceSpecialTokens sentencepiece_special_tokens(const Tokenizer& tokenizer);

}  // namespace megatron::tokenizer
