#!/usr/bin/env bash
# preprocess_data with the three SentencePiece tokenizer types against Megatron's preprocessing
# (megatron_preprocess.py: Megatron's encode loop, megatron-core's dataset writer): byte-identical
# .bin/.idx for the stress texts, GPT-2's edge-case strings, the whole golden corpus (list-valued
# documents included) and empty documents, with --append-eod and without, over 2 workers. The
# models come from tests/unit/tokenizer/sentencepiece_reference.py. BPE models only: on Unigram
# ties this SentencePiece (Debian 0.1.97) and PyPI's (0.2.3) may segment differently (see
# test_sentencepiece.cpp). Also the flags: --vocab-extra-ids accepted and ignored as Megatron's
# preprocess_data does, and --append-eod refused for a model without EOS.
set -euo pipefail
TESTS=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib.sh
source "$TESTS/e2e/lib.sh"

step "models (sentencepiece's trainer) and documents"
assert_succeeds "$PYTHON" "$TESTS/unit/tokenizer/sentencepiece_reference.py" --out models \
  --texts "$DATA/gpt2_vectors.jsonl" --texts "$CORPUS" --max-chars 600000 --models-only
{
  cat models/texts.jsonl "$CORPUS"
  printf '%s\n' '{"text": ""}' '{"text": []}' '{"text": ["", ""]}' '{"text": ["", "<s>a</s>", "", "b"]}' \
    '{"text": " "}' '{"text": "<EOD>"}' '{"text": "last"}'
} >docs.jsonl
ok "$(wc -l <docs.jsonl) documents"

# Megatron's datasets, all made in one Python process (importing megatron-core takes seconds).
CASES=()
for type in SentencePieceTokenizer GPTSentencePieceTokenizer Llama2Tokenizer; do
  CASES+=("$type llama_bpe --append-eod" "$type bpe_user --append-eod" "$type llama_bpe")
done
for case in "${CASES[@]}"; do
  read -r type model flags <<<"$case"
  echo "--input docs.jsonl --output-prefix megatron_${type}_${model}${flags:+_eod} --tokenizer-type $type" \
    "--tokenizer-model models/$model.model $flags"
done >megatron_jobs.txt
step "Megatron's preprocessing of the ${#CASES[@]} cases"
assert_succeeds "$PYTHON" "$TESTS/e2e/megatron_preprocess.py" --jobs megatron_jobs.txt
ok "written"

for case in "${CASES[@]}"; do
  read -r type model flags <<<"$case"
  name="${type}_${model}${flags:+_eod}"
  step "$type, $model${flags:+, --append-eod}: identical to Megatron's"
  # shellcheck disable=SC2086  # the flags are separate words
  assert_succeeds "$PREPROCESS" --input docs.jsonl --output-prefix "ours_$name" --workers 2 \
    --tokenizer-type "$type" --tokenizer-model "models/$model.model" $flags
  assert_same_dataset "ours_${name}_text_document" "megatron_${name}_text_document"
done

step "--vocab-extra-ids is accepted and ignored (Megatron's preprocess_data forces 0)"
assert_succeeds "$PREPROCESS" --input docs.jsonl --output-prefix extra --workers 2 --append-eod \
  --tokenizer-type SentencePieceTokenizer --tokenizer-model models/bpe_user.model --vocab-extra-ids 5
assert_same_dataset extra_text_document megatron_SentencePieceTokenizer_bpe_user_eod_text_document

step "errors name the flag and the file"
assert_fails_with "--tokenizer-type Llama2Tokenizer needs --tokenizer-model" \
  "$PREPROCESS" --input docs.jsonl --output-prefix bad --tokenizer-type Llama2Tokenizer
assert_fails_with "--tokenizer-model nowhere.model cannot be read" \
  "$PREPROCESS" --input docs.jsonl --output-prefix bad --tokenizer-type GPTSentencePieceTokenizer \
  --tokenizer-model nowhere.model
assert_fails_with "--tokenizer-model docs.jsonl is not a SentencePiece model" \
  "$PREPROCESS" --input docs.jsonl --output-prefix bad --tokenizer-type SentencePieceTokenizer \
  --tokenizer-model docs.jsonl
assert_fails_with "--append-eod: GPTSentencePieceTokenizer has no end-of-document token" \
  "$PREPROCESS" --input docs.jsonl --output-prefix bad --tokenizer-type GPTSentencePieceTokenizer \
  --tokenizer-model models/no_bos_eos.model --append-eod
assert_fails_with "has no BOS piece (bos_id -1)" \
  "$PREPROCESS" --input docs.jsonl --output-prefix bad --tokenizer-type Llama2Tokenizer \
  --tokenizer-model models/no_bos_eos.model
if compgen -G 'bad*' >/dev/null; then fail "outputs left after errors: $(echo bad*)"; fi
ok "no output left by the refused runs"

echo "PASS preprocess_sentencepiece"
