#!/usr/bin/env bash
# HuggingFace export and import. Export: models of the three families
# trained by megatron_train and exported by convert_checkpoint load in transformers (its own
# from_pretrained, CPU, fp32) and give the logits our model gives, within 1e-5: GPT-2 (tied;
# untied with erf GeLU and no biases; sharded files with an index) and Llama (GQA untied without
# biases; tied with biases), Mixtral (4 experts, top-2, GQA), and a Llama trained at TP2 x PP2
# under mpirun. A mix no family
# holds is refused by name and leaves nothing behind. Import: randomly initialised transformers
# GPT-2, Llama and Mixtral models become TP2 x PP2 checkpoints whose logits (our model, resharded to one
# process) equal transformers'; megatron_train loads the Llama one at TP2 x PP2 as it is and trains
# on; exporting an import (Llama, Mixtral) gives back the original tensors.
# PYTHON must have transformers (scripts/setup.sh puts it into .venv).
set -uo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=mpi_lib.sh
source "$(dirname "$0")/mpi_lib.sh"
need_tools CONVERT MODEL_LOGITS GENERATE
LOGITS=$MODEL_LOGITS
PY=$PYTHON
"$PY" -c "import transformers" 2>/dev/null || fail "$PY has no transformers (scripts/setup.sh installs it into .venv)"

TRAIN_ARGS=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
            --micro-batch-size 2 --global-batch-size 4 --lr 3e-3 --data-path "$GOLDEN" --data-cache-path "$WORK/cache"
            "${TOKENIZER[@]}" --log-interval 5 --eval-iters 0 --train-iters 10 --save-interval 10)
LLAMA=(--position-embedding-type rope --normalization RMSNorm --swiglu --ffn-hidden-size 96)
IDS=(50256 464 2068 7586 21831 18045 625 262 16931 3290 13 50256 40 588)

# check NAME CLASS CONVERT_FLAGS...: exports $WORK/NAME.ckpt and compares the logits.
check() {
  local name=$1 class=$2
  shift 2
  assert_succeeds "$CONVERT" --model-type GPT --loader megatron --saver hf --load-dir "$WORK/$name.ckpt" \
    --save-dir "$WORK/$name.hf" "$@"
  assert_succeeds "$LOGITS" "$WORK/$name.ckpt" "$WORK/$name.logits" "${IDS[@]}"
  assert_succeeds "$PY" "$(dirname "$0")/hf_compare.py" "$WORK/$name.hf" "$WORK/$name.logits" "$class" "${IDS[@]}"
  ok "$(tail -1 "$WORK/out.txt")"
}
train() {  # train NAME FLAGS...
  local name=$1
  shift
  assert_succeeds "$TRAIN" "${TRAIN_ARGS[@]}" --save "$WORK/$name.ckpt" "$@"
}

step "GPT-2: tied embeddings, fused (tanh) GeLU"
train gpt2
check gpt2 GPT2LMHeadModel
[[ $(find "$WORK/gpt2.hf" -name '*.safetensors' | wc -l) -eq 1 ]] || fail "expected one model.safetensors"
grep -q '"activation_function": "gelu_new"' "$WORK/gpt2.hf/config.json" || fail "config.json: not gelu_new"
# Trained with Megatron's padding to 50304 rows; the export has the tokenizer's 50257.
grep -q '"vocab_size": 50257' "$WORK/gpt2.hf/config.json" || fail "config.json: the vocabulary is not the tokenizer's"

step "GPT-2: untied, erf GeLU, no linear biases, split into shards of 100KB with an index"
train gpt2u --untie-embeddings-and-output-weights --no-bias-gelu-fusion --disable-bias-linear
check gpt2u GPT2LMHeadModel --max-shard-size 100KB
[[ -f $WORK/gpt2u.hf/model.safetensors.index.json ]] || fail "no model.safetensors.index.json"
[[ $(find "$WORK/gpt2u.hf" -name 'model-*-of-*.safetensors' | wc -l) -gt 2 ]] || fail "expected several shards"

step "Llama: grouped-query attention (2 groups), untied, no biases"
train llama "${LLAMA[@]}" --group-query-attention --num-query-groups 2 --untie-embeddings-and-output-weights \
  --disable-bias-linear
check llama LlamaForCausalLM

step "Llama: tied embeddings, with linear biases, rotary base 500000"
train llamab "${LLAMA[@]}" --rotary-base 500000
check llamab LlamaForCausalLM

step "the rotary-base 500000 export imports back (rope_theta as a whole number) with the same logits"
assert_succeeds "$CONVERT" --model-type GPT --loader hf --saver megatron --load-dir "$WORK/llamab.hf" \
  --save-dir "$WORK/llamab.back"
grep -q -- "--rotary-base 500000 " "$WORK/out.txt" || fail "the printed flags lack --rotary-base 500000"
assert_succeeds "$LOGITS" "$WORK/llamab.back" "$WORK/llamab.back.logits" "${IDS[@]}"
assert_succeeds "$PY" "$(dirname "$0")/hf_compare.py" "$WORK/llamab.hf" "$WORK/llamab.back.logits" LlamaForCausalLM \
  "${IDS[@]}"
ok "$(tail -1 "$WORK/out.txt")"
assert_fails_with "only for --saver megatron" "$CONVERT" --model-type GPT --loader megatron --saver hf \
  --load-dir "$WORK/llamab.ckpt" --save-dir "$WORK/unused.hf" --target-tensor-parallel-size 2
assert_fails_with "only for --loader megatron --saver hf" "$CONVERT" --model-type GPT --loader hf \
  --saver megatron --load-dir "$WORK/llamab.hf" --save-dir "$WORK/unused.ckpt" --hf-dtype bfloat16
ok "flags of the other direction are refused"

step "Mixtral: 4 experts, top-2, grouped-query attention, untied"
train mixtral "${LLAMA[@]}" --group-query-attention --num-query-groups 2 --untie-embeddings-and-output-weights \
  --disable-bias-linear --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 48 --moe-aux-loss-coeff 1e-2
check mixtral MixtralForCausalLM
grep -q '"num_local_experts": 4' "$WORK/mixtral.hf/config.json" || fail "config.json: not 4 experts"

step "Llama trained at TP2 x PP2 (4 ranks) exports from its shards"
assert_succeeds mpi 4 "${TRAIN_ARGS[@]}" "${LLAMA[@]}" --group-query-attention --num-query-groups 2 \
  --untie-embeddings-and-output-weights --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
  --save "$WORK/llama22.ckpt"
[[ -d $WORK/llama22.ckpt/iter_0000010/mp_rank_01_001 ]] || fail "no TP2 x PP2 shard folders"
check llama22 LlamaForCausalLM
assert_succeeds "$CONVERT" --model-type GPT --loader megatron --saver hf --load-dir "$WORK/llama22.ckpt" \
  --save-dir "$WORK/again.hf"
grep -q "tensor-parallel 2 x pipeline-parallel 2" "$WORK/out.txt" || fail "the export did not read the TP2 x PP2 layout"

step "generation: greedy tokens equal transformers' generate on the export; seeds and top-k behave"
for name in gpt2 llama mixtral; do
  assert_succeeds "$GENERATE" --load "$WORK/$name.ckpt" --prompt "The quick brown fox jumps" --max-new-tokens 16 \
    --greedy --print-token-ids
  grep -q "^The quick brown fox jumps" "$WORK/out.txt" || fail "$name: the text does not start with the prompt"
  prompt_ids=$(sed -n 's/^prompt token ids: //p' "$WORK/err.txt")
  ours=$(sed -n 's/^generated token ids: //p' "$WORK/err.txt")
  # shellcheck disable=SC2086  # the ids are separate arguments
  theirs=$("$PY" "$(dirname "$0")/hf_generate.py" "$WORK/$name.hf" 50257 16 $prompt_ids 2>/dev/null | tail -1)
  [[ -n $ours && $ours == "$theirs" ]] || fail "$name: ours '$ours', transformers '$theirs'"
  ok "$name: $(wc -w <<<"$ours") greedy tokens equal transformers' ($ours)"
  [[ $name == llama ]] && llama_ours=$ours
done
# The prompt from standard input (echo's newline dropped) gives what --prompt gave.
echo "The quick brown fox jumps" | "$GENERATE" --load "$WORK/llama.ckpt" --max-new-tokens 16 --greedy \
  --print-token-ids >"$WORK/stdin.txt" 2>&1 || fail "generate from standard input failed"
[[ $(sed -n 's/^generated token ids: //p' "$WORK/stdin.txt") == "$llama_ours" ]] || fail "stdin prompt: other tokens"
ok "a prompt on standard input gives the same tokens"
sampled() {  # sampled FLAGS...: the generated ids of a sampled run of the Llama checkpoint
  "$GENERATE" --load "$WORK/llama.ckpt" --prompt "The quick brown fox" --max-new-tokens 12 --ignore-eod \
    --print-token-ids "$@" 2>&1 >/dev/null | sed -n 's/^generated token ids: //p'
}
a=$(sampled --seed 7 --top-p 0.9)
[[ $(wc -w <<<"$a") -eq 12 ]] || fail "expected 12 sampled tokens, got '$a'"
[[ $a == "$(sampled --seed 7 --top-p 0.9)" ]] || fail "the same seed gave different tokens"
[[ $a != "$(sampled --seed 8 --top-p 0.9)" ]] || fail "seeds 7 and 8 gave the same 12 tokens"
[[ $(sampled --top-k 1 --seed 5) == "$(sampled --greedy)" ]] || fail "--top-k 1 differs from --greedy"
assert_fails_with "cannot both be set" "$GENERATE" --load "$WORK/llama.ckpt" --prompt x --top-k 3 --top-p 0.5
ok "seeded sampling repeats, seeds differ, top-k 1 is greedy, top-k with top-p refused"

step "a model neither family holds is refused by name, and nothing is written"
train mix --position-embedding-type rope
assert_fails_with "this mix is neither" "$CONVERT" --model-type GPT --loader megatron --saver hf \
  --load-dir "$WORK/mix.ckpt" --save-dir "$WORK/mix.hf"
[[ -e $WORK/mix.hf ]] && fail "mix.hf was created"
compgen -G "$WORK/mix.hf.tmp.*" >/dev/null && fail "a temporary was left"
assert_fails_with "already exists" "$CONVERT" --model-type GPT --loader megatron --saver hf \
  --load-dir "$WORK/gpt2.ckpt" --save-dir "$WORK/gpt2.hf"
ok "refused"

step "import: random transformers GPT-2, Llama and Mixtral models to TP2 x PP2 checkpoints, same logits"
for fam in gpt2 llama mixtral; do
  assert_succeeds "$PY" "$(dirname "$0")/hf_random_model.py" "$fam" "$WORK/$fam.orig"
  assert_succeeds "$CONVERT" --model-type GPT --loader hf --saver megatron --load-dir "$WORK/$fam.orig" \
    --save-dir "$WORK/$fam.imported" --target-tensor-parallel-size 2 --target-pipeline-parallel-size 2 \
    --vocab-file "$VOCAB" --merge-file "$MERGES"
  cp "$WORK/out.txt" "$WORK/$fam.import.txt"
  [[ -d $WORK/$fam.imported/iter_0000000/mp_rank_01_001 ]] || fail "$fam: no TP2 x PP2 shard folders"
  assert_succeeds "$LOGITS" "$WORK/$fam.imported" "$WORK/$fam.imported.logits" "${IDS[@]}"
  class=GPT2LMHeadModel
  [[ $fam == llama ]] && class=LlamaForCausalLM
  [[ $fam == mixtral ]] && class=MixtralForCausalLM
  assert_succeeds "$PY" "$(dirname "$0")/hf_compare.py" "$WORK/$fam.orig" "$WORK/$fam.imported.logits" "$class" "${IDS[@]}"
  ok "$(tail -1 "$WORK/out.txt")"
done

step "generation from the imports (random weights: varied tokens) equals transformers' on the originals"
for fam in gpt2 llama mixtral; do
  assert_succeeds "$GENERATE" --load "$WORK/$fam.imported" --prompt "Once upon a time" --max-new-tokens 24 --greedy \
    --ignore-eod --print-token-ids
  prompt_ids=$(sed -n 's/^prompt token ids: //p' "$WORK/err.txt")
  ours=$(sed -n 's/^generated token ids: //p' "$WORK/err.txt")
  # shellcheck disable=SC2086  # the ids are separate arguments
  theirs=$("$PY" "$(dirname "$0")/hf_generate.py" "$WORK/$fam.orig" 50257 24 $prompt_ids 2>/dev/null | tail -1)
  [[ -n $ours && $ours == "$theirs" ]] || fail "$fam: ours '$ours', transformers '$theirs'"
  [[ $(tr ' ' '\n' <<<"$ours" | sort -u | wc -l) -gt 4 ]] || fail "$fam: too few distinct tokens to tell anything: $ours"
  ok "$fam: 24 greedy tokens equal transformers' ($ours)"
done

step "megatron_train loads the imported Llama at TP2 x PP2 without resharding and trains on"
read -ra flags < <(sed -n 's/^train from it with: megatron_train \(.*\) --tensor-model-parallel-size.*/\1/p' \
  "$WORK/llama.import.txt")
[[ ${#flags[@]} -gt 10 ]] || { cat "$WORK/llama.import.txt"; fail "no megatron_train flags printed"; }
assert_succeeds mpi 4 "${flags[@]}" --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
  --load "$WORK/llama.imported" --finetune --micro-batch-size 1 --global-batch-size 2 --lr 1e-4 --train-iters 3 \
  --data-path "$GOLDEN" --data-cache-path "$WORK/cache" "${TOKENIZER[@]}" --log-interval 1 --eval-iters 0
grep -q "successfully loaded checkpoint from $WORK/llama.imported" "$WORK/out.txt" || fail "no load line"
grep -q "resharding" "$WORK/out.txt" && fail "the imported checkpoint was resharded: its layout is not TP2 x PP2"
grep -q "iteration        3/       3" "$WORK/out.txt" || fail "training did not go on"
ok "loaded as saved and trained 3 iterations"

step "exporting the imported Llama and Mixtral gives back the original tensors"
for fam in llama mixtral; do
  assert_succeeds "$CONVERT" --model-type GPT --loader megatron --saver hf --load-dir "$WORK/$fam.imported" \
    --save-dir "$WORK/$fam.back"
  assert_succeeds "$PY" - "$WORK/$fam.orig" "$WORK/$fam.back" <<'PY'
import sys
import torch
from safetensors.torch import load_file
a, b = load_file(sys.argv[1] + "/model.safetensors"), load_file(sys.argv[2] + "/model.safetensors")
assert sorted(a) == sorted(b), (sorted(set(a) ^ set(b)))
for name in a:
    assert a[name].shape == b[name].shape and torch.equal(a[name], b[name]), name
print(f"{len(a)} tensors equal")
PY
  ok "$fam: $(tail -1 "$WORK/out.txt")"
done
