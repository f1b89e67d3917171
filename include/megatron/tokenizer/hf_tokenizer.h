// Megatron's HuggingFaceTokenizer (`--tokenizer-type HuggingFaceTokenizer --tokenizer-model DIR`):
// what `transformers.AutoTokenizer.from_pretrained(DIR)(text).input_ids` gives, read from the
// folder's tokenizer.json (the `tokenizers` library's format: added tokens, normalizer,
// pre-tokenizer, BPE model, post-processor, decoder) and tokenizer_config.json /
// special_tokens_map.json (the eos token, add_bos_token / add_eos_token, named special tokens).
//   - Added tokens written in a document (`</s>`, `<|endoftext|>`, ...) become their ids.
//   - The post-processor's template adds its tokens to every document (Llama's BOS).
//   - split_special_tokens in tokenizer_config.json: special tokens written in a document stay
//     text (the other added tokens are still found), as transformers does.
//   - End of document: the eos token's id. Vocabulary size: len(tokenizer), the model's tokens
//     plus the added ones.
// Only local files are read: a hub name is refused, naming the folder to download it to.
#pragma once

#include <memory>
#include <string>

#include "megatron/tokenizer/tokenizer.h"

namespace megatron::tokenizer {

// `path`: a folder with tokenizer.json, or a tokenizer.json file (its folder's configuration is
// read when present). Throws megatron::Error naming the file, the JSON path and the flag.
std::unique_ptr<Tokenizer> make_hf_tokenizer(const std::string& path);

}  // namespace megatron::tokenizer
