#!/usr/bin/env bash
# Every tokenizer type exports as a tokenizer transformers loads and encodes with as we did: for
# GPT2BPETokenizer, Llama2Tokenizer, GPTSentencePieceTokenizer, SentencePieceTokenizer (with
# --vocab-extra-ids) and TikTokenizer (both patterns), a small Llama trains one iteration, its
# export's AutoTokenizer encodes each of the stress texts (many scripts, emoji, combining marks,
# CR/LF, NUL, long numbers, special-token text such as "</s>" and "<SEP>" inside documents) to the
# ids preprocess_data wrote for that document, and config.json names the tokenizer's BOS.
# SentencePiece models: the hf_reference fixture's (BPE with byte fallback, NFKC, as trained by
# default) and one with Llama-2's settings (identity normalization, spaces kept, digits split).
# BPE both: for Unigram models Debian's library (ours) and PyPI's (transformers') break ties of the
# segmentation score differently on a few texts (docs/data.md), which is no property of the export.
# Last, --no-save-tokenizer-assets leaves the copies out of a checkpoint.
set -uo pipefail
TESTS=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib.sh
source "$TESTS/e2e/lib.sh"
need_tools TRAIN CONVERT
PY=$PYTHON
REFERENCE="$(dirname "$DATA")/unit/hf_reference"
[ -f "$REFERENCE/done" ] || fail "$REFERENCE has no tokenizer folders (the fixture hf_tokenizer_reference makes them)"
"$PY" -c "import transformers, sentencepiece" 2>/dev/null || fail "$PY has no transformers or sentencepiece"

# The stress texts (the first 1,500 of the fixture's), and special-token text written in documents.
head -1500 "$REFERENCE/llama2.jsonl" >texts.jsonl
"$PY" - >>texts.jsonl <<'PY'
import json
for t in ["a</s>b <s> c <unk>", "x<SEP>y <EOD> z<extra_id_1> <extra_id_2>", "<CLS><CLS>", "<|endoftext|> end",
          "  lead", "tail  ", "\r\n\r", ""]:
    print(json.dumps({"text": t}))
PY
"$PY" - "$WORK/identity" "$REFERENCE/work/corpus.txt" <<'PY' || fail "could not train the SentencePiece model"
import sys, sentencepiece as spm
spm.SentencePieceTrainer.train(input=sys.argv[2], model_prefix=sys.argv[1], vocab_size=2000, model_type="bpe",
                               normalization_rule_name="identity", remove_extra_whitespaces=False, byte_fallback=True,
                               split_digits=True, character_coverage=0.99, minloglevel=2)
PY
assert_succeeds "$PY" "$TESTS/unit/tokenizer/tiktoken_reference.py" --gpt2 "$(dirname "$VOCAB")" \
  --texts texts.jsonl --out "$WORK/tik"

MODEL=(--num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16 --max-position-embeddings 16
  --position-embedding-type rope --normalization RMSNorm --swiglu --ffn-hidden-size 64 --micro-batch-size 1
  --global-batch-size 1 --lr 1e-3 --split 100,0,0 --eval-iters 0 --train-iters 1 --save-interval 1)

# check NAME EXPECTED_BOS TOKENIZER_FLAGS...: preprocess, train, export; the comparison is queued
# for exported_tokenizer_check.py, which runs them all in one Python process.
check() {
  local name=$1 bos=$2
  shift 2
  step "$name"
  assert_succeeds "$PREPROCESS" --input texts.jsonl --output-prefix "$name" --workers 1 "$@"
  assert_succeeds "$TRAIN" "${MODEL[@]}" --data-path "${name}_text_document" --save "$WORK/$name.ckpt" "$@"
  assert_succeeds "$CONVERT" --model-type GPT --loader megatron --saver hf --load-dir "$WORK/$name.ckpt" \
    --save-dir "$WORK/$name.hf"
  echo "$WORK/$name.hf ${name}_text_document texts.jsonl $bos ${EXTRA_IDS:-0}" >>tokenizer_jobs.txt
  ok "exported (transformers' check queued)"
}

check gpt2 50256 "${TOKENIZER[@]}"
cp "$REFERENCE/work/llama2-slow/tokenizer.model" "$WORK/nfkc.model"
check llama2 1 --tokenizer-type Llama2Tokenizer --tokenizer-model "$WORK/nfkc.model"
check gpt_sp 1 --tokenizer-type GPTSentencePieceTokenizer --tokenizer-model "$WORK/identity.model"
EXTRA_IDS=3 check sp_extra 1 --tokenizer-type SentencePieceTokenizer --tokenizer-model "$WORK/identity.model" --vocab-extra-ids 3
check tik_v2 1 --tokenizer-type TikTokenizer --tokenizer-model "$WORK/tik/vocab.json" --tiktoken-pattern v2 \
  --vocab-size 51256
check tik_v1 1 --tokenizer-type TikTokenizer --tokenizer-model "$WORK/tik/vocab.json" --tiktoken-pattern v1 \
  --vocab-size 40000 --tiktoken-num-special-tokens 16

step "AutoTokenizer on each export encodes every text to the ids preprocess_data wrote"
assert_succeeds "$PY" "$TESTS/e2e/exported_tokenizer_check.py" tokenizer_jobs.txt
sed 's/^/   /' "$WORK/out.txt"

step "the exported TikTokenizer, read back as a HuggingFaceTokenizer, writes the same dataset"
assert_succeeds "$PREPROCESS" --input texts.jsonl --output-prefix tik_as_hf --workers 1 \
  --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$WORK/tik_v2.hf"
cmp tik_v2_text_document.bin tik_as_hf_text_document.bin || fail "the tokenizer.json encodes differently from TikTokenizer"
ok "byte-identical .bin"

step "an exported SentencePiece folder imports as the type it was trained with"
for name in llama2:Llama2Tokenizer: gpt_sp:GPTSentencePieceTokenizer: "sp_extra:SentencePieceTokenizer: --vocab-extra-ids 3"; do
  IFS=: read -r run type rest <<<"$name"
  assert_succeeds "$CONVERT" --model-type GPT --loader hf --saver megatron --load-dir "$WORK/$run.hf" \
    --save-dir "$WORK/$run.reimported"
  assert_contains "$WORK/out.txt" "--tokenizer-type $type --tokenizer-model $WORK/$run.hf/tokenizer.model$rest --tensor"
done
ok "Llama2Tokenizer, GPTSentencePieceTokenizer, SentencePieceTokenizer with --vocab-extra-ids 3"

step "--no-save-tokenizer-assets: checkpoints without the copies"
assert_succeeds "$TRAIN" "${MODEL[@]}" --data-path gpt2_text_document --save "$WORK/bare.ckpt" "${TOKENIZER[@]}" \
  --no-save-tokenizer-assets
grep -Eq "^  save_tokenizer_assets \.+ False$" "$WORK/out.txt" || fail "the argument dump does not say save_tokenizer_assets False"
[[ -d $WORK/bare.ckpt/iter_0000001 && ! -e $WORK/bare.ckpt/iter_0000001/tokenizer ]] || fail "a tokenizer/ folder was written"
ok "no tokenizer/ folder; the dump says save_tokenizer_assets False"
