// Out-of-line error path of the pre-tokenizer (see pretokenizer.h).
#include "megatron/tokenizer/pretokenizer.h"

#include "megatron/core/check.h"

namespace megatron::tokenizer {

void throw_invalid_utf8(std::string_view text, std::size_t pos) {
  MEGATRON_FAIL("invalid UTF-8 at byte ", pos, " of a ", text.size(), "-byte text");
}

}  // namespace megatron::tokenizer
