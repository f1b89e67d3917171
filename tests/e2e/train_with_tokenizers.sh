#!/usr/bin/env bash
# The workflow with today's tokenizers, no GPT-2 files anywhere:
#  - a Llama-style HuggingFace folder with its own tokenizer.json (the Llama-3 test tokenizer of the
#    hf_reference fixture, 67,500 ids) imports with that tokenizer; the checkpoint carries a copy;
#    megatron_train trains on from it with the flags the import prints, on data preprocessed with
#    the same tokenizer, and names its dataset caches with the tokenizer identity megatron-core's
#    MegatronTokenizer gives Megatron's _HuggingFaceTokenizer;
#  - with the tokenizer folder gone, generate encodes the prompt as AutoTokenizer does (from the
#    checkpoint's copy) and the export writes a tokenizer transformers loads and encodes with as we
#    did; transformers' greedy generation on the export gives our ids;
#  - Llama2Tokenizer (SentencePiece) trains with TensorBoard on (the SentencePiece library lives
#    beside libprotobuf in that process), its checkpoint carries tokenizer.model, and generate
#    works from the copy once the original is gone;
#  - TikTokenizer trains with the cache identity megatron-core's class gives CustomTikTokenizer and
#    generates from its copy.
set -uo pipefail
TESTS=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib.sh
source "$TESTS/e2e/lib.sh"
need_tools TRAIN CONVERT GENERATE
PY=$PYTHON
REFERENCE="$(dirname "$DATA")/unit/hf_reference"
[ -f "$REFERENCE/done" ] || fail "$REFERENCE has no tokenizer folders (the fixture hf_tokenizer_reference makes them)"
"$PY" -c "import transformers" 2>/dev/null || fail "$PY has no transformers (scripts/setup.sh installs it into .venv)"

TRAIN_FLAGS=(--micro-batch-size 2 --global-batch-size 4 --lr 1e-3 --split 100,0,0 --eval-iters 0 --log-interval 1)
PROMPT="The quick brown fox"

step "a Llama folder with the Llama-3 tokenizer imports with its own tokenizer"
assert_succeeds "$PY" "$TESTS/e2e/hf_random_model.py" --vocab 67500 llama "$WORK/llama.hf"
cp "$REFERENCE/llama3/"* "$WORK/llama.hf/"
assert_succeeds "$CONVERT" --model-type GPT --loader hf --saver megatron --load-dir "$WORK/llama.hf" \
  --save-dir "$WORK/llama.imported"
cp "$WORK/out.txt" "$WORK/import.txt"
assert_contains "$WORK/import.txt" "--tokenizer-type HuggingFaceTokenizer --tokenizer-model $WORK/llama.hf"
cmp "$WORK/llama.hf/tokenizer.json" "$WORK/llama.imported/iter_0000000/tokenizer/tokenizer.json" ||
  fail "the imported checkpoint carries no copy of tokenizer.json"
ok "recorded as HuggingFaceTokenizer, tokenizer.json copied into iter_0000000/tokenizer/"

step "preprocess with the tokenizer, then train on from the import with the printed flags"
head -200 "$CORPUS" >docs.jsonl
assert_succeeds "$PREPROCESS" --input docs.jsonl --output-prefix llama3 --workers 2 --append-eod \
  --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$WORK/llama.hf"
read -ra flags < <(sed -n 's/^train from it with: megatron_train \(.*\) --tensor-model-parallel-size.*/\1/p' \
  "$WORK/import.txt")
[[ ${#flags[@]} -gt 10 ]] || { cat "$WORK/import.txt"; fail "no megatron_train flags printed"; }
assert_succeeds "$TRAIN" "${flags[@]}" "${TRAIN_FLAGS[@]}" --load "$WORK/llama.imported" --finetune --train-iters 4 \
  --data-path llama3_text_document --save "$WORK/llama.trained" --save-interval 4
assert_contains "$WORK/out.txt" "> building HuggingFaceTokenizer tokenizer ..."
assert_contains "$WORK/out.txt" " > padded vocab (size: 67500) with "
assert_contains "$WORK/out.txt" "iteration        4/       4"
cmp "$WORK/llama.hf/tokenizer_config.json" "$WORK/llama.trained/iter_0000004/tokenizer/tokenizer_config.json" ||
  fail "the trained checkpoint carries no copy of tokenizer_config.json"
ok "trained 4 iterations; the checkpoint carries the tokenizer's files"

step "the dataset cache is named by Megatron's tokenizer identity (megatron-core's MegatronTokenizer)"
description=$(find llama3_text_document/cache -name '*-train-description.txt' | head -1)
[[ -n $description ]] || fail "no cache description"
assert_succeeds "$PY" - "$description" "$WORK/llama.hf" <<'PY'
import json, sys
from megatron.core.datasets.megatron_tokenizer import MegatronTokenizer

class _HuggingFaceTokenizer(MegatronTokenizer):  # core_v0.12.0's constructor call
    def __init__(self, pretrained_model_name_or_path, **kwargs):
        super().__init__(pretrained_model_name_or_path, **kwargs)
    tokenize = detokenize = vocab = inv_vocab = vocab_size = None

ours = json.load(open(sys.argv[1]))["tokenizer"]
theirs = json.loads(_HuggingFaceTokenizer(sys.argv[2]).unique_description)
assert ours == theirs, (ours, theirs)
PY
ok "the description's tokenizer is megatron-core's"

step "with the tokenizer folder gone, generate reads the checkpoint's copy"
mv "$WORK/llama.hf" "$WORK/llama.hf.moved"
assert_succeeds "$GENERATE" --load "$WORK/llama.trained" --prompt "$PROMPT" --greedy --max-new-tokens 12 \
  --print-token-ids
ours_prompt=$(sed -n 's/^prompt token ids: //p' "$WORK/err.txt")
ours_new=$(sed -n 's/^generated token ids: //p' "$WORK/err.txt")
theirs_prompt=$("$PY" -c "import sys, transformers; t = transformers.AutoTokenizer.from_pretrained(sys.argv[1]); \
print(' '.join(map(str, t(sys.argv[2]).input_ids)))" "$WORK/llama.hf.moved" "$PROMPT")
[[ -n $ours_prompt && $ours_prompt == "$theirs_prompt" ]] || fail "prompt ids: ours '$ours_prompt', AutoTokenizer '$theirs_prompt'"
ok "prompt ids equal AutoTokenizer's ($ours_prompt, the BOS first)"

step "the export writes a tokenizer transformers loads; its greedy generation gives our ids"
assert_succeeds "$CONVERT" --model-type GPT --loader megatron --saver hf --load-dir "$WORK/llama.trained" \
  --save-dir "$WORK/llama.export"
exported_prompt=$("$PY" -c "import sys, transformers; t = transformers.AutoTokenizer.from_pretrained(sys.argv[1]); \
print(' '.join(map(str, t(sys.argv[2]).input_ids)))" "$WORK/llama.export" "$PROMPT")
[[ $exported_prompt == "$ours_prompt" ]] || fail "the exported tokenizer encodes '$exported_prompt', we '$ours_prompt'"
[[ -n $ours_new ]] || fail "no generated ids"
# shellcheck disable=SC2086  # the ids are separate arguments
hf_job generate "$WORK/llama.export" 67500 12 "${ours_new// /,}" $ours_prompt
hf_checks
ok "AutoTokenizer on the export encodes as we did; 12 greedy ids equal transformers' ($ours_new)"

step "Llama2Tokenizer (SentencePiece) trains with TensorBoard on; generate works from the checkpoint's copy"
cp "$REFERENCE/work/llama2-slow/tokenizer.model" "$WORK/sp.model"
assert_succeeds "$PREPROCESS" --input docs.jsonl --output-prefix sp --workers 1 --append-eod \
  --tokenizer-type Llama2Tokenizer --tokenizer-model "$WORK/sp.model"
assert_succeeds "$TRAIN" --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 \
  --max-position-embeddings 32 --position-embedding-type rope --normalization RMSNorm --swiglu --ffn-hidden-size 96 \
  "${TRAIN_FLAGS[@]}" --train-iters 3 --data-path sp_text_document --tokenizer-type Llama2Tokenizer \
  --tokenizer-model "$WORK/sp.model" --tensorboard-dir "$WORK/tb" --save "$WORK/sp.ckpt" --save-interval 3
assert_contains "$WORK/out.txt" "iteration        3/       3"
ls "$WORK/tb"/events.out.tfevents.* >/dev/null 2>&1 || fail "no TensorBoard event file"
cmp "$WORK/sp.model" "$WORK/sp.ckpt/iter_0000003/tokenizer/tokenizer.model" || fail "no copy of tokenizer.model"
rm "$WORK/sp.model"
assert_succeeds "$GENERATE" --load "$WORK/sp.ckpt" --prompt "$PROMPT" --greedy --max-new-tokens 4 --print-token-ids
grep -q "^prompt token ids: 1 " "$WORK/err.txt" || fail "the prompt does not start with the BOS id 1: $(cat "$WORK/err.txt")"
ok "trained, TensorBoard written, generated from the copy with a BOS first"

step "TikTokenizer trains, names its caches as megatron-core's CustomTikTokenizer would, and generates from its copy"
assert_succeeds "$PY" "$TESTS/unit/tokenizer/tiktoken_reference.py" --gpt2 "$(dirname "$VOCAB")" --texts docs.jsonl \
  --out "$WORK/tik"
TIK=(--tokenizer-type TikTokenizer --tokenizer-model "$WORK/tik/vocab.json" --tiktoken-pattern v2 --vocab-size 51256)
assert_succeeds "$PREPROCESS" --input docs.jsonl --output-prefix tik --workers 1 --append-eod "${TIK[@]}"
assert_succeeds "$TRAIN" --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 \
  --max-position-embeddings 32 "${TRAIN_FLAGS[@]}" --train-iters 2 --data-path tik_text_document "${TIK[@]}" \
  --save "$WORK/tik.ckpt" --save-interval 2
description=$(find tik_text_document/cache -name '*-train-description.txt' | head -1)
assert_succeeds "$PY" - "$description" "$WORK/tik/vocab.json" "$TESTS/unit/tokenizer" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[3])
from tiktoken_reference import PATTERNS  # Megatron's patterns, verbatim
from megatron.core.datasets.megatron_tokenizer import MegatronTokenizer

class CustomTikTokenizer(MegatronTokenizer):  # core_v0.12.0's constructor call, as build_tokenizer makes it
    def __init__(self, path, pattern, vocab_size, num_special_tokens, special_tokens):
        super().__init__(path, pattern=pattern, vocab_size=vocab_size, num_special_tokens=num_special_tokens,
                         special_tokens=special_tokens)
    tokenize = detokenize = vocab = inv_vocab = vocab_size = None

ours = json.load(open(sys.argv[1]))["tokenizer"]
theirs = json.loads(CustomTikTokenizer(sys.argv[2], PATTERNS["v2"], 51256, 1000, None).unique_description)
assert ours == theirs, (ours, theirs)
PY
mv "$WORK/tik" "$WORK/tik.moved"
assert_succeeds "$GENERATE" --load "$WORK/tik.ckpt" --prompt "$PROMPT" --greedy --max-new-tokens 4 --print-token-ids
ok "identity equal to megatron-core's; generated from the checkpoint's copy"
