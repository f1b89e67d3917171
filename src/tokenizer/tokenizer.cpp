// Tokenizer conveniences and the --tokenizer-type factory (see tokenizer.h).
#include "megatron/tokenizer/tokenizer.h"

#include <algorithm>

#include "megatron/core/check.h"
#include "megatron/tokenizer/gpt2_bpe_tokenizer.h"

namespace megatron::tokenizer {

std::vector<std::int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<std::int32_t> ids;
  make_encoder()->encode(text, ids);
  return ids;
}

std::vector<std::string> supported_tokenizer_types() { return {Gpt2BpeTokenizer::kTypeName}; }

std::unique_ptr<Tokenizer> build_tokenizer(const TokenizerOptions& options) {
  static const std::vector<std::string> kMegatronTypes = {
      "BertWordPieceLowerCase", "BertWordPieceCase", "GPT2BPETokenizer",
      "SentencePieceTokenizer", "GPTSentencePieceTokenizer", "HuggingFaceTokenizer",
      "Llama2Tokenizer", "TikTokenizer", "MultimodalTokenizer", "NullTokenizer",
      "NullMultimodalTokenizer", "SFTTokenizer"};
  if (options.type == Gpt2BpeTokenizer::kTypeName) {
    MEGATRON_CHECK(!options.vocab_file.empty(), "--tokenizer-type GPT2BPETokenizer needs --vocab-file");
    MEGATRON_CHECK(!options.merge_file.empty(), "--tokenizer-type GPT2BPETokenizer needs --merge-file");
    return Gpt2BpeTokenizer::from_files(options.vocab_file, options.merge_file);
  }
  const bool known = std::find(kMegatronTypes.begin(), kMegatronTypes.end(), options.type) !=
                     kMegatronTypes.end();
  MEGATRON_CHECK(!known, "--tokenizer-type ", options.type,
                 " is a Megatron tokenizer this build does not implement yet; supported: GPT2BPETokenizer");
  MEGATRON_FAIL("--tokenizer-type ", options.type, " is not a Megatron tokenizer type; supported: GPT2BPETokenizer");
}

}  // namespace megatron::tokenizer
