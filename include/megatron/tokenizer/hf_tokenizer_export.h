// A tokenizer as the tokenizer files of a HuggingFace model folder, written so that transformers'
// AutoTokenizer (5.x) loads them and encodes every text as the tokenizer did in training: the ids
// of preprocess_data for a document, with the same handling of special-token text.
//   GPT2BPETokenizer      vocab.json, merges.txt, tokenizer_config.json (GPT2Tokenizer,
//                         <|endoftext|> as bos, eos and unk), special_tokens_map.json.
//   HuggingFaceTokenizer  its own tokenizer.json and configuration, as they are.
//   SentencePiece types   tokenizer.model and a tokenizer_config.json for transformers'
//                         SentencePieceBackend, which runs the SentencePiece library itself.
//                         transformers' LlamaTokenizer is not used: it converts the model to a BPE
//                         tokenizer.json without the model's normalizer and with merges of its own,
//                         and encodes a quarter of the stress texts differently even for a Llama-2
//                         style (identity) model. Llama2Tokenizer: a BOS before every text
//                         (special_tokens_pattern "bos"); SentencePieceTokenizer: Megatron's special
//                         tokens (<CLS> <SEP> <EOD> <MASK>, pad, BOS, EOS, <extra_id_i>) as added
//                         tokens at their ids, found in the text as Megatron finds them.
//   TikTokenizer          a tokenizer.json converted from the vocabulary: byte-level BPE whose
//                         merges are each token's splits into two tokens, in rank order (as
//                         transformers' own tiktoken converter makes them); the pattern as a Split;
//                         a piece that is a whole token taken as it is (ignore_merges), as tiktoken
//                         does; the special tokens at ids 0.. in the model's vocabulary.
//   NullTokenizer         nothing.
// Where Megatron's tokenizer treats special-token text in a document as ordinary text (GPT-2,
// GPTSentencePiece, Llama2, TikTokenizer), tokenizer_config.json says split_special_tokens.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "megatron/tokenizer/tokenizer.h"

namespace megatron::tokenizer {

// (file name, contents) for the folder; `model_max_length` goes into tokenizer_config.json where
// this writes one. Throws megatron::Error naming the file or flag that cannot be read or written
// in HuggingFace's format.
std::vector<std::pair<std::string, std::string>> hf_tokenizer_files(const TokenizerOptions& options,
                                                                     std::int64_t model_max_length);

}  // namespace megatron::tokenizer
