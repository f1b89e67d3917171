#!/usr/bin/env bash
# HuggingFace folders, tokenizers and weights that do not fit, with transformers as the reference
# where behaviour must match it. Randomly initialised transformers models (hf_random_model.py),
# edited the way a broken or hostile folder would be:
#   - a tied config.json whose files hold a different lm_head imports untied, with transformers'
#     logits (transformers loads it untied too);
#   - a config.json that contradicts the tensors (num_key_value_heads null, a wrong head_dim, a
#     vocabulary other than the embedding's rows, fewer layers than the files hold), integers that
#     are not integers, an unsupported model_type: refused naming the key or the tensor, one error,
#     no C++ stack trace, no checkpoint written;
#   - safetensors files the safetensors library refuses (tensors sharing bytes, trailing bytes, a
#     tensor named twice, a malformed __metadata__): refused naming the file;
#   - generate and the export refuse a tokenizer smaller than the one the checkpoint recorded,
#     naming that one;
#   - NaN weights stop generate naming the NaN logits, not a sampling crash;
#   - convert_checkpoint names a bad or missing --ckpt-iteration and a deleted meta.json, and notes
#     Megatron's convert.py flags it has no use for; generate refuses sampling flags out of range
#     (NaN, inf, seeds outside 64 bits), a closed or unreadable standard input, and a prompt that
#     with --max-new-tokens needs more positions than the model has, before printing anything.
# PYTHON must have transformers (scripts/setup.sh puts it into .venv).
set -uo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
need_tools CONVERT MODEL_LOGITS GENERATE
PY=$PYTHON
"$PY" -c "import transformers" 2>/dev/null || fail "$PY has no transformers (scripts/setup.sh installs it into .venv)"
IDS=(50256 464 2068 7586 21831 18045 625 262 16931 3290 13 50256 40 588)

import_hf() {  # import_hf NAME: $WORK/NAME.hf -> $WORK/NAME.ckpt
  assert_succeeds "$CONVERT" --model-type GPT --loader hf --saver megatron --load-dir "$WORK/$1.hf" \
    --save-dir "$WORK/$1.ckpt" --vocab-file "$VOCAB" --merge-file "$MERGES"
}

# edit FROM TO CODE: queues a copy of $WORK/FROM.hf as $WORK/TO.hf on which the Python CODE runs
# with `config` (config.json as a dict) and `tensors` (model.safetensors as a dict), written back;
# apply_edits makes every queued copy in one Python process (importing torch takes seconds).
edit() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$WORK/edits.tsv"; }
apply_edits() {
  "$PY" - "$WORK" "$WORK/edits.tsv" <<'PY' || fail "editing the folders failed"
import json
import shutil
import sys

import torch
from safetensors.torch import load_file, save_file

work = sys.argv[1]
for line in open(sys.argv[2], encoding="utf-8"):
    source, target, code = line.rstrip("\n").split("\t", 2)
    folder = f"{work}/{target}.hf"
    shutil.copytree(f"{work}/{source}.hf", folder)
    config = json.load(open(folder + "/config.json"))
    tensors = load_file(folder + "/model.safetensors")
    exec(code, {"config": config, "tensors": tensors, "torch": torch})
    json.dump(config, open(folder + "/config.json", "w"), indent=2)
    save_file({k: v.contiguous() for k, v in tensors.items()}, folder + "/model.safetensors",
              metadata={"format": "pt"})
PY
}

# one_error TOOL: err.txt is one "TOOL: error:" message without a C++ stack trace.
one_error() {
  [[ $(grep -c "error:" "$WORK/err.txt") -eq 1 ]] || { show "$WORK/err.txt" stderr; fail "expected one error"; }
  if grep -q "frame #\|Exception raised from" "$WORK/err.txt"; then
    show "$WORK/err.txt" stderr
    fail "a C++ stack trace"
  fi
  assert_contains "$WORK/err.txt" "$1: error: "
}

# refused NAME EXPECTED: importing $WORK/NAME.hf fails with EXPECTED, one error, nothing written.
refused() {
  assert_fails_with "$2" "$CONVERT" --model-type GPT --loader hf --saver megatron --load-dir "$WORK/$1.hf" \
    --save-dir "$WORK/$1.ckpt" --vocab-file "$VOCAB" --merge-file "$MERGES"
  one_error convert_checkpoint
  [[ -e $WORK/$1.ckpt/latest_checkpointed_iteration.txt ]] && fail "$1: a refused import wrote a checkpoint"
  compgen -G "$WORK/$1.ckpt/iter_*" >/dev/null && fail "$1: a refused import left an iteration folder"
  return 0
}

step "random transformers GPT-2 (tied) and Llama (untied, 2 key/value heads of 16) models"
assert_succeeds "$PY" "$(dirname "$0")/hf_random_model.py" gpt2 "$WORK/gpt2.hf" llama "$WORK/llama.hf"
# The edited copies the steps below import (each named where it is used).
edit gpt2 gpt2head 'torch.manual_seed(5); tensors["lm_head.weight"] = 0.3 * torch.randn_like(tensors["transformer.wte.weight"])'
edit llama llamatied 'config["tie_word_embeddings"] = True'
edit llama kvnull 'config["num_key_value_heads"] = None'  # transformers: one key/value head per query head
edit llama headdim 'config["head_dim"] = 32'
edit llama fewer 'config["num_hidden_layers"] = 2'
edit gpt2 vocabup 'config["vocab_size"] = 50400'
edit gpt2 rowsup 'tensors["transformer.wte.weight"] = torch.cat([tensors["transformer.wte.weight"], torch.zeros(47, 64)])'
edit gpt2 wrap 'config["n_layer"] = 4294967298'
edit gpt2 frac 'config["n_layer"] = 2.7'
edit gpt2 huge 'config["n_layer"] = 1e12'
edit llama mistral 'config["model_type"] = "mistral"; del config["vocab_size"]'
edit gpt2 nan 'tensors["transformer.ln_f.weight"][5] = float("nan")'
apply_edits
ok "written, and $(wc -l <"$WORK/edits.tsv") edited copies"

step "a tied config.json whose files hold a different lm_head imports untied, with transformers' logits"
for name in gpt2head llamatied; do
  import_hf "$name"
  assert_contains "$WORK/out.txt" "note: config.json says tie_word_embeddings, but lm_head.weight differs"
  assert_contains "$WORK/out.txt" "--untie-embeddings-and-output-weights"
  assert_succeeds "$MODEL_LOGITS" "$WORK/$name.ckpt" "$WORK/$name.logits" "${IDS[@]}"
  class=GPT2LMHeadModel
  [[ $name == llamatied ]] && class=LlamaForCausalLM
  # transformers warns "both are present ... we will NOT tie them" and keeps the file's lm_head.
  hf_job logits "$WORK/$name.hf" "$WORK/$name.logits" "$class" "${IDS[@]}"
done
hf_checks

step "config.json contradicting the tensors is refused naming the tensor, before anything is reshaped"
refused kvnull "model.layers.0.self_attn.k_proj.weight has shape [32, 64]; config.json needs [64, 64]"
# transformers refuses it too (a size mismatch, without ignore_mismatched_sizes).
"$PY" -c "import sys, transformers; transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1])" \
  "$WORK/kvnull.hf" >/dev/null 2>&1 && fail "transformers loaded kvnull: the reference changed"
ok "transformers refuses kvnull as well"
refused headdim "model.layers.0.self_attn.q_proj.weight has shape [64, 64]; config.json needs [128, 64]"
refused fewer "num_hidden_layers is 2 but the safetensors files hold 4 layers"
refused vocabup "transformer.wte.weight has shape [50257, 64]; config.json needs [50400, 64]"
refused rowsup "transformer.wte.weight has shape [50304, 64]; config.json needs [50257, 64]"

step "config.json's integers are read as integers, range-checked, naming the key and the value"
refused wrap "n_layer is 4294967298; expected a whole number from 1 to 2147483647"
refused frac "n_layer is 2.7; expected a whole number"
refused huge "n_layer is 1000000000000.0; expected a whole number"
refused mistral "model_type 'mistral' is not supported; supported are gpt2"
grep -q "vocab_size" "$WORK/err.txt" && fail "an unsupported model_type was reported as a missing vocab_size"
ok "model_type is said to be unsupported"

step "safetensors files the safetensors library refuses are refused naming the file"
# rewrite NAME CASE: $WORK/NAME.hf is gpt2.hf with model.safetensors rewritten byte by byte, broken
# as CASE says; the safetensors library (the reference) must refuse the result.
rewrite() {
  cp -r "$WORK/gpt2.hf" "$WORK/$1.hf"
  "$PY" - "$WORK/$1.hf/model.safetensors" "$2" <<'PY' || fail "rewriting $1 failed"
import json
import struct
import sys

path, case = sys.argv[1], sys.argv[2]
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
names = sorted((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"][0])
text = None
if case == "overlap":  # the last tensor moved 4 bytes back, into the one before it; the file as long
    last = header[names[-1]]["data_offsets"]
    header[names[-1]]["data_offsets"] = [last[0] - 4, last[1] - 4]
    data = data[:-4]
elif case == "trailing":
    data += bytes(16)
elif case == "duplicate":  # the first tensor's entry repeated under the second one's name, last in the text
    text = json.dumps(header)[:-1] + ', "%s": %s}' % (names[1], json.dumps(header[names[0]]))
elif case == "metadata":
    header["__metadata__"] = {"format": "pt", "step": 7}
text = text if text is not None else json.dumps(header)
open(path, "wb").write(struct.pack("<Q", len(text)) + text.encode() + data)
PY
  "$PY" -c "import sys; from safetensors.numpy import load_file; load_file(sys.argv[1])" \
    "$WORK/$1.hf/model.safetensors" >/dev/null 2>&1 && fail "the safetensors library read $1: the reference changed"
  return 0
}
rewrite overlap overlap
refused overlap "overlap.hf/model.safetensors: tensors"
assert_contains "$WORK/err.txt" "share data bytes"
rewrite trailing trailing
refused trailing "trailing.hf/model.safetensors: 16 bytes after the last tensor's data"
rewrite duplicate duplicate
refused duplicate "duplicate.hf/model.safetensors: the safetensors header names"
rewrite metadata metadata
refused metadata "metadata.hf/model.safetensors: the safetensors __metadata__ entry \"step\" is a JSON number"
ok "the four files the safetensors library refuses are refused, naming model.safetensors"

step "generate and the export refuse a smaller tokenizer than the checkpoint recorded, naming it"
import_hf gpt2
"$PY" - "$VOCAB" "$WORK/small.json" "$WORK/small.txt" <<'PY' || fail "writing the small tokenizer failed"
import json
import sys

vocab = {t: i for t, i in json.load(open(sys.argv[1])).items() if i < 1000}
vocab["<|endoftext|>"] = 1000
json.dump(vocab, open(sys.argv[2], "w"))
open(sys.argv[3], "w").write("#version: 0.2\n")
PY
assert_fails_with "has 1001 tokens but this checkpoint was trained with --vocab-file $VOCAB" \
  "$GENERATE" --load "$WORK/gpt2.ckpt" --prompt "Hello" --vocab-file "$WORK/small.json" --merge-file "$WORK/small.txt"
one_error generate
assert_fails_with "has 1001 tokens but this checkpoint was trained with --vocab-file $VOCAB" \
  "$CONVERT" --model-type GPT --loader megatron --saver hf --load-dir "$WORK/gpt2.ckpt" --save-dir "$WORK/small.hf" \
  --vocab-file "$WORK/small.json" --merge-file "$WORK/small.txt"
one_error convert_checkpoint
[[ -e $WORK/small.hf ]] && fail "the refused export wrote small.hf"
ok "refused, nothing written"

step "NaN weights: generate names the NaN logits instead of crashing in the sampler"
import_hf nan
for mode in --greedy --top-k=40; do
  assert_fails_with "the model's logits are NaN (50257 of 50257) at step 1: the checkpoint's weights are not finite" \
    "$GENERATE" --load "$WORK/nan.ckpt" --prompt "Hello" --max-new-tokens 4 "$mode"
  one_error generate
done

step "convert_checkpoint: --ckpt-iteration, a deleted meta.json, Megatron's convert.py flags"
export_flags=(--model-type GPT --loader megatron --saver hf --load-dir "$WORK/gpt2.ckpt")
assert_fails_with "--ckpt-iteration -3: expected an iteration number >= 0" \
  "$CONVERT" "${export_flags[@]}" --save-dir "$WORK/it.hf" --ckpt-iteration -3
one_error convert_checkpoint
assert_fails_with "--ckpt-iteration 7: $WORK/gpt2.ckpt has no checkpoint of iteration 7 (it holds iteration 0)" \
  "$CONVERT" "${export_flags[@]}" --save-dir "$WORK/it.hf" --ckpt-iteration 7
grep -q tracker "$WORK/err.txt" && fail "a missing --ckpt-iteration was blamed on the tracker"
[[ -e $WORK/it.hf ]] && fail "a refused export wrote it.hf"
cp -r "$WORK/gpt2.ckpt" "$WORK/nometa.ckpt"
rm "$WORK/nometa.ckpt/iter_0000000/mp_rank_00/meta.json"
for tool in convert generate; do
  if [[ $tool == convert ]]; then
    assert_fails_with "checkpoint $WORK/nometa.ckpt/iter_0000000/mp_rank_00 has no meta.json: it is partial" \
      "$CONVERT" --model-type GPT --loader megatron --saver hf --load-dir "$WORK/nometa.ckpt" --save-dir "$WORK/nm.hf"
  else
    assert_fails_with "checkpoint $WORK/nometa.ckpt/iter_0000000/mp_rank_00 has no meta.json: it is partial" \
      "$GENERATE" --load "$WORK/nometa.ckpt" --prompt "Hello" --max-new-tokens 2
  fi
done
assert_succeeds "$CONVERT" "${export_flags[@]}" --save-dir "$WORK/mp.hf" --megatron-path /opt/Megatron-LM \
  --max-queue-size 8 --no-checking --ckpt-iteration 0
assert_contains "$WORK/err.txt" \
  "convert_checkpoint: note: --megatron-path is a flag of Megatron-LM's Python convert.py; this tool has no use for it"
assert_contains "$WORK/err.txt" "note: --no-checking is a flag"
ok "Megatron's --megatron-path, --max-queue-size and --no-checking are noted, the export runs"

step "generate: sampling flags out of range, a closed standard input, prompts longer than the positions"
gen() { "$GENERATE" --load "$WORK/gpt2.ckpt" "$@"; }
closed_stdin() { "$@" <&-; }
assert_fails_with "--top-p must be in [0, 1]" gen --prompt Hi --top-p nan
assert_fails_with "--temperature must be a positive number up to 100" gen --prompt Hi --temperature inf
assert_fails_with "--temperature must be a positive number up to 100" gen --prompt Hi --temperature nan
for seed in -1 18446744073709551616 12x; do
  assert_fails_with "--seed $seed: expected a whole number from 0 to 18446744073709551615" gen --prompt Hi --seed "$seed"
  one_error generate
done
assert_succeeds gen --prompt Hi --max-new-tokens 2 --top-k 5 --seed 18446744073709551615
assert_fails_with "standard input is closed" closed_stdin gen --max-new-tokens 2
one_error generate
assert_empty "$WORK/out.txt" "stdout of generate with standard input closed"
assert_fails_with "cannot read the prompt from standard input: Is a directory" gen --max-new-tokens 2 <"$WORK"
assert_succeeds gen --max-new-tokens 2 </dev/null
assert_contains "$WORK/err.txt" "note: the prompt is empty: generating a new document from the end-of-document token"
# The model has 64 learned positions; " Hello" is one token.
long=$(printf ' Hello%.0s' {1..64})
assert_fails_with "the prompt has 64 tokens; the model has 64 positions" gen --prompt "$long" --max-new-tokens 1
assert_empty "$WORK/out.txt" "stdout of generate refusing a too-long prompt (the prompt is not echoed)"
assert_fails_with "the prompt (60 tokens) and --max-new-tokens 5 need 65 positions; the model has 64" \
  gen --prompt "${long:0:360}" --max-new-tokens 5
assert_empty "$WORK/out.txt" "stdout of generate refusing prompt + tokens beyond the positions"
assert_succeeds gen --prompt "${long:0:360}" --max-new-tokens 4 --ignore-eod --greedy --print-token-ids
assert_eq 4 "$(grep '^generated token ids:' "$WORK/err.txt" | wc -w | awk '{print $1 - 3}')" \
  "tokens generated into the last 4 positions"
