#!/usr/bin/env bash
# preprocess_data --tokenizer-type HuggingFaceTokenizer writes the same .bin/.idx bytes as
# Megatron's preprocessing (megatron_preprocess.py: its encode loop over AutoTokenizer, written by
# megatron-core's IndexedDatasetBuilder) for the tokenizer folders of hf_reference.py (the CTest
# fixture hf_tokenizer_reference makes them): byte-level BPE (GPT-2, Llama-3 past 65,500 ids so
# int32, Qwen2), SentencePiece BPE with byte fallback, and the component test folder; on the golden
# corpus plus documents with added-token text and empty documents, with two workers.
set -euo pipefail
TESTS=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$TESTS/e2e/lib.sh"

REFERENCE="$(dirname "$DATA")/unit/hf_reference"
[ -f "$REFERENCE/done" ] || fail "$REFERENCE has no tokenizer folders (the fixture hf_tokenizer_reference makes them)"

step "documents"
{
  cat "$CORPUS"
  printf '%s\n' '{"text": ""}' '{"text": []}' '{"text": ["", "<s>a</s>", "", "b"]}' '{"text": " "}' \
    '{"text": "<|begin_of_text|>x<|end_of_text|> <|endoftext|><|im_start|>hi<|im_end|>"}' \
    '{"text": "a [mask] b hello world </s>"}' '{"text": "last"}'
} >docs.jsonl
ok "$(wc -l <docs.jsonl) documents"

NAMES=(gpt2 llama3 qwen2 llama2 metaspace)
step "Megatron's preprocessing with each tokenizer (one Python process: importing megatron-core takes seconds)"
for name in "${NAMES[@]}"; do
  printf -- '--input docs.jsonl --output-prefix megatron_%s --tokenizer-type HuggingFaceTokenizer' "$name"
  printf -- ' --tokenizer-model %q --append-eod\n' "$REFERENCE/$name"
done >megatron_jobs.txt
assert_succeeds "$PYTHON" "$TESTS/e2e/megatron_preprocess.py" --jobs megatron_jobs.txt
ok "written"
for name in "${NAMES[@]}"; do
  step "$name: identical to Megatron's, with --append-eod"
  assert_succeeds "$PREPROCESS" --input docs.jsonl --output-prefix "ours_$name" --workers 2 \
    --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$REFERENCE/$name" --append-eod
  assert_same_dataset "ours_${name}_text_document" "megatron_${name}_text_document"
done
grep -q int32 <("$INFO" ours_llama3_text_document 2>&1) || fail "llama3 (67,500 ids) did not give int32 tokens"
ok "llama3's 67,500 ids give int32 tokens"

step "errors name the flag and the folder"
assert_fails_with "--tokenizer-type HuggingFaceTokenizer needs --tokenizer-model" \
  "$PREPROCESS" --input docs.jsonl --output-prefix bad --tokenizer-type HuggingFaceTokenizer
assert_fails_with "is not a local folder or tokenizer.json" \
  "$PREPROCESS" --input docs.jsonl --output-prefix bad --tokenizer-type HuggingFaceTokenizer \
  --tokenizer-model meta-llama/Llama-3.1-8B
if compgen -G 'bad*' >/dev/null; then fail "outputs left after errors: $(echo bad*)"; fi
ok "no output left by the refused runs"

echo "PASS preprocess_hf"
