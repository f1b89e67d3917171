#!/usr/bin/env bash
# HuggingFace export and import. Export: models of the five families trained by megatron_train and
# exported by convert_checkpoint load in transformers (its own from_pretrained, CPU, fp32) and give
# the logits our model gives, within 1e-5: GPT-2 (tied; untied with erf GeLU and no biases; sharded
# files with an index), Llama (GQA untied without biases; tied with biases), Mixtral (4 experts,
# top-2, GQA), Qwen3 (query/key norms, head size 24), Qwen3-MoE (experts in every other layer,
# --moe-router-pre-softmax), and a Llama trained at TP2 x PP2 under mpirun; greedy generation from
# the checkpoints equals transformers' generate on the exports. A mix no family holds is refused by
# name and leaves nothing behind. Import: randomly initialised transformers GPT-2, Llama, Mixtral,
# Qwen3 and Qwen3-MoE models (and the Qwen3-MoE's state_dict with transformers' fused experts)
# become TP2 x PP2 checkpoints whose logits and greedy tokens (our model, resharded to one process)
# equal transformers'; the Qwen3-MoE imported for PP2 x EP2 too (Megatron's expert folders), which
# megatron_train loads as it is with the printed command line and trains on; exporting an import
# gives back the original tensors.
# One case per call (see run_case in lib.sh): the exports by family, generation from them, the
# imports and what is done with them. transformers' checks are queued and run in one Python
# process per case (hf_job / hf_checks).
# PYTHON must have transformers (scripts/setup.sh puts it into .venv).
set -uo pipefail
CASES=(
  "export_gpt2 1"
  "export_llama 1"
  "export_mixtral 1"
  "export_qwen3 1"
  "export_tp2_pp2 2"
  "generation 1 export_gpt2 export_llama export_mixtral export_qwen3"
  "refuse_mix 1"
  "import 1"
  "import_expert_parallel 2 import"
  "export_imports 1 import"
  "vocab_rows 1"
)
[[ ${1:-} == --list ]] && { printf '%s\n' "${CASES[@]}"; exit 0; }
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=mpi_lib.sh
source "$(dirname "$0")/mpi_lib.sh"
need_tools CONVERT MODEL_LOGITS GENERATE
LOGITS=$MODEL_LOGITS
PY=$PYTHON
"$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('transformers') is None)" ||
  fail "$PY has no transformers (scripts/setup.sh installs it into .venv)"

TRAIN_ARGS=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
            --micro-batch-size 2 --global-batch-size 4 --lr 3e-3 --data-path "$GOLDEN" --data-cache-path "$WORK/cache"
            "${TOKENIZER[@]}" --log-interval 5 --eval-iters 0 --train-iters 10 --save-interval 10)
LLAMA=(--position-embedding-type rope --normalization RMSNorm --swiglu --ffn-hidden-size 96)
IDS=(50256 464 2068 7586 21831 18045 625 262 16931 3290 13 50256 40 588)

# check NAME CLASS CONVERT_FLAGS...: exports $OUT/NAME.ckpt and compares the logits.
check() {
  local name=$1 class=$2
  shift 2
  assert_succeeds "$CONVERT" --model-type GPT --loader megatron --saver hf --load-dir "$OUT/$name.ckpt" \
    --save-dir "$OUT/$name.hf" "$@"
  assert_succeeds "$LOGITS" "$OUT/$name.ckpt" "$WORK/$name.logits" "${IDS[@]}"
  hf_job logits "$OUT/$name.hf" "$WORK/$name.logits" "$class" "${IDS[@]}"
  ok "$name exported (transformers' check queued)"
}
# greedy CKPT HF_DIR NEW PROMPT [FLAGS...]: our greedy tokens from CKPT; transformers' on HF_DIR queued.
greedy() {
  local ckpt=$1 hf=$2 new=$3 prompt=$4
  shift 4
  assert_succeeds "$GENERATE" --load "$ckpt" --prompt "$prompt" --max-new-tokens "$new" --greedy --print-token-ids "$@"
  grep -q "^$prompt" "$WORK/out.txt" || fail "$ckpt: the text does not start with the prompt"
  prompt_ids=$(sed -n 's/^prompt token ids: //p' "$WORK/err.txt")
  ours=$(sed -n 's/^generated token ids: //p' "$WORK/err.txt")
  [[ -n $ours ]] || fail "$ckpt: no generated ids"
  # shellcheck disable=SC2086  # the ids are separate arguments
  hf_job generate "$hf" 50257 "$new" "${ours// /,}" $prompt_ids
}
train() {  # train NAME FLAGS...: a fresh $OUT/NAME.ckpt (and no $OUT/NAME.hf yet)
  local name=$1
  shift
  rm -rf "${OUT:?}/$name.ckpt" "$OUT/$name.hf"
  assert_succeeds "$TRAIN" "${TRAIN_ARGS[@]}" --save "$OUT/$name.ckpt" "$@"
}

# OUT: where a case keeps what it makes ($SHARED: the generation and import cases read the others').
OUT=
case_export_gpt2() {
  OUT=$SHARED
  step "GPT-2: tied embeddings, fused (tanh) GeLU"
  train gpt2
  check gpt2 GPT2LMHeadModel
  [[ $(find "$OUT/gpt2.hf" -name '*.safetensors' | wc -l) -eq 1 ]] || fail "expected one model.safetensors"
  grep -q '"activation_function": "gelu_new"' "$OUT/gpt2.hf/config.json" || fail "config.json: not gelu_new"
  # Trained with Megatron's padding to 50304 rows; the export has the tokenizer's 50257.
  grep -q '"vocab_size": 50257' "$OUT/gpt2.hf/config.json" || fail "config.json: the vocabulary is not the tokenizer's"

  step "GPT-2: untied, erf GeLU, no linear biases, split into shards of 100KB with an index"
  train gpt2u --untie-embeddings-and-output-weights --no-bias-gelu-fusion --disable-bias-linear
  check gpt2u GPT2LMHeadModel --max-shard-size 100KB
  [[ -f $OUT/gpt2u.hf/model.safetensors.index.json ]] || fail "no model.safetensors.index.json"
  [[ $(find "$OUT/gpt2u.hf" -name 'model-*-of-*.safetensors' | wc -l) -gt 2 ]] || fail "expected several shards"

  assert_fails_with "already exists" "$CONVERT" --model-type GPT --loader megatron --saver hf \
    --load-dir "$OUT/gpt2.ckpt" --save-dir "$OUT/gpt2.hf"
  hf_checks
}

case_export_llama() {
  OUT=$SHARED
  rm -rf "$OUT/llamab.back"
  step "Llama: grouped-query attention (2 groups), untied, no biases"
  train llama "${LLAMA[@]}" --group-query-attention --num-query-groups 2 --untie-embeddings-and-output-weights \
    --disable-bias-linear
  check llama LlamaForCausalLM

  step "Llama: tied embeddings, with linear biases, rotary base 500000"
  train llamab "${LLAMA[@]}" --rotary-base 500000
  check llamab LlamaForCausalLM

  step "the rotary-base 500000 export imports back (rope_theta as a whole number) with the same logits"
  assert_succeeds "$CONVERT" --model-type GPT --loader hf --saver megatron --load-dir "$OUT/llamab.hf" \
    --save-dir "$OUT/llamab.back"
  grep -q -- "--rotary-base 500000 " "$WORK/out.txt" || fail "the printed flags lack --rotary-base 500000"
  assert_succeeds "$LOGITS" "$OUT/llamab.back" "$OUT/llamab.back.logits" "${IDS[@]}"
  hf_job logits "$OUT/llamab.hf" "$OUT/llamab.back.logits" LlamaForCausalLM "${IDS[@]}"
  ok "imported back (transformers' check queued)"
  assert_fails_with "only for --saver megatron" "$CONVERT" --model-type GPT --loader megatron --saver hf \
    --load-dir "$OUT/llamab.ckpt" --save-dir "$OUT/unused.hf" --target-tensor-parallel-size 2
  assert_fails_with "only for --loader megatron --saver hf" "$CONVERT" --model-type GPT --loader hf \
    --saver megatron --load-dir "$OUT/llamab.hf" --save-dir "$OUT/unused.ckpt" --hf-dtype bfloat16
  ok "flags of the other direction are refused"

  hf_checks
}

case_export_mixtral() {
  OUT=$SHARED
  step "Mixtral: 4 experts, top-2, grouped-query attention, untied"
  train mixtral "${LLAMA[@]}" --group-query-attention --num-query-groups 2 --untie-embeddings-and-output-weights \
    --disable-bias-linear --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 48 --moe-aux-loss-coeff 1e-2
  check mixtral MixtralForCausalLM
  grep -q '"num_local_experts": 4' "$OUT/mixtral.hf/config.json" || fail "config.json: not 4 experts"

  hf_checks
}

case_export_qwen3() {
  OUT=$SHARED
  QWEN3=("${LLAMA[@]}" --group-query-attention --num-query-groups 2 --untie-embeddings-and-output-weights
         --disable-bias-linear --qk-layernorm --kv-channels 24)
  step "Qwen3: query/key norms, head size 24 (not hidden / heads)"
  train qwen3 "${QWEN3[@]}"
  check qwen3 Qwen3ForCausalLM

  step "Qwen3-MoE: experts in layers 0 and 2 of 4, layers 1 and 3 dense, softmax before top-k"
  train qwen3moe "${QWEN3[@]}" --num-layers 4 --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 48 \
    --moe-layer-freq 2 --moe-router-pre-softmax --moe-aux-loss-coeff 1e-2
  check qwen3moe Qwen3MoeForCausalLM
  grep -q '"norm_topk_prob": false' "$OUT/qwen3moe.hf/config.json" || fail "config.json: the top-k is renormalised"
  tr -d ' \n' <"$OUT/qwen3moe.hf/config.json" | grep -q '"mlp_only_layers":\[1,3\]' ||
    fail "config.json: mlp_only_layers is not [1, 3]"

  hf_checks
}

case_export_tp2_pp2() {
  OUT=$SHARED
  rm -rf "$OUT/llama22.ckpt" "$OUT/llama22.hf" "$OUT/again.hf"
  step "Llama trained at TP2 x PP2 (4 ranks) exports from its shards"
  assert_succeeds mpi 4 "${TRAIN_ARGS[@]}" "${LLAMA[@]}" --group-query-attention --num-query-groups 2 \
    --untie-embeddings-and-output-weights --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
    --save "$OUT/llama22.ckpt"
  [[ -d $OUT/llama22.ckpt/iter_0000010/mp_rank_01_001 ]] || fail "no TP2 x PP2 shard folders"
  check llama22 LlamaForCausalLM
  assert_succeeds "$CONVERT" --model-type GPT --loader megatron --saver hf --load-dir "$OUT/llama22.ckpt" \
    --save-dir "$OUT/again.hf"
  grep -q "tensor-parallel 2 x pipeline-parallel 2" "$WORK/out.txt" || fail "the export did not read the TP2 x PP2 layout"

  hf_checks
}

case_generation() {
  OUT=$SHARED
  local name
  for name in gpt2 llama mixtral qwen3 qwen3moe; do shared "$name.hf" >/dev/null || exit 1; done
  step "generation: greedy tokens from the checkpoints (transformers' generate on the exports queued)"
  for name in gpt2 llama mixtral qwen3 qwen3moe; do
    greedy "$OUT/$name.ckpt" "$OUT/$name.hf" 16 "The quick brown fox jumps"
    ok "$name: $(wc -w <<<"$ours") greedy tokens ($ours)"
    [[ $name == llama ]] && llama_ours=$ours
  done
  # The prompt from standard input (echo's newline dropped) gives what --prompt gave.
  echo "The quick brown fox jumps" | "$GENERATE" --load "$OUT/llama.ckpt" --max-new-tokens 16 --greedy \
    --print-token-ids >"$WORK/stdin.txt" 2>&1 || fail "generate from standard input failed"
  [[ $(sed -n 's/^generated token ids: //p' "$WORK/stdin.txt") == "$llama_ours" ]] || fail "stdin prompt: other tokens"
  ok "a prompt on standard input gives the same tokens"
  sampled() {  # sampled FLAGS...: the generated ids of a sampled run of the Llama checkpoint
    "$GENERATE" --load "$OUT/llama.ckpt" --prompt "The quick brown fox" --max-new-tokens 12 --ignore-eod \
      --print-token-ids "$@" 2>&1 >/dev/null | sed -n 's/^generated token ids: //p'
  }
  a=$(sampled --seed 7 --top-p 0.9)
  [[ $(wc -w <<<"$a") -eq 12 ]] || fail "expected 12 sampled tokens, got '$a'"
  [[ $a == "$(sampled --seed 7 --top-p 0.9)" ]] || fail "the same seed gave different tokens"
  [[ $a != "$(sampled --seed 8 --top-p 0.9)" ]] || fail "seeds 7 and 8 gave the same 12 tokens"
  [[ $(sampled --top-k 1 --seed 5) == "$(sampled --greedy)" ]] || fail "--top-k 1 differs from --greedy"
  assert_fails_with "cannot both be set" "$GENERATE" --load "$OUT/llama.ckpt" --prompt x --top-k 3 --top-p 0.5
  ok "seeded sampling repeats, seeds differ, top-k 1 is greedy, top-k with top-p refused"

  hf_checks
}

case_refuse_mix() {
  OUT=$WORK
  step "a model neither family holds is refused by name, and nothing is written"
  train mix --position-embedding-type rope
  assert_fails_with "this mix is neither" "$CONVERT" --model-type GPT --loader megatron --saver hf \
    --load-dir "$OUT/mix.ckpt" --save-dir "$OUT/mix.hf"
  [[ -e $OUT/mix.hf ]] && fail "mix.hf was created"
  compgen -G "$OUT/mix.hf.tmp.*" >/dev/null && fail "a temporary was left"
  ok "refused"
}

case_import() {
  OUT=$SHARED/imports
  rm -rf "$OUT"
  mkdir -p "$OUT"
  IMPORTS=(gpt2 llama mixtral qwen3 qwen3_moe qwen3_moe-fused)
  step "import: random transformers models of each family to TP2 x PP2 checkpoints"
  assert_succeeds "$PY" "$(dirname "$0")/hf_random_model.py" gpt2 "$OUT/gpt2.orig" llama "$OUT/llama.orig" \
    mixtral "$OUT/mixtral.orig" qwen3 "$OUT/qwen3.orig" qwen3_moe "$OUT/qwen3_moe.orig"
  mv "$OUT/qwen3_moe.orig-fused" "$OUT/qwen3_moe-fused.orig"
  for fam in "${IMPORTS[@]}"; do
    assert_succeeds "$CONVERT" --model-type GPT --loader hf --saver megatron --load-dir "$OUT/$fam.orig" \
      --save-dir "$OUT/$fam.imported" --target-tensor-parallel-size 2 --target-pipeline-parallel-size 2 \
      --vocab-file "$VOCAB" --merge-file "$MERGES"
    cp "$WORK/out.txt" "$OUT/$fam.import.txt"
    [[ -d $OUT/$fam.imported/iter_0000000/mp_rank_01_001 ]] || fail "$fam: no TP2 x PP2 shard folders"
    assert_succeeds "$LOGITS" "$OUT/$fam.imported" "$OUT/$fam.imported.logits" "${IDS[@]}"
    class=$(sed -n 's/.*(HuggingFace \([A-Za-z0-9]*\)).*/\1/p' "$OUT/$fam.import.txt")
    # The fused state_dict is compared with transformers' load of the hub-form original.
    hf_job logits "$OUT/${fam%-fused}.orig" "$OUT/$fam.imported.logits" "$class" "${IDS[@]}"
    greedy "$OUT/$fam.imported" "$OUT/${fam%-fused}.orig" 24 "Once upon a time" --ignore-eod
    [[ $(tr ' ' '\n' <<<"$ours" | sort -u | wc -l) -gt 4 ]] || fail "$fam: too few distinct tokens to tell anything: $ours"
    ok "$fam: imported as $class; 24 greedy tokens ($ours)"
  done
  grep -q -- "--moe-layer-freq '\[1,1,0,1\]'" "$OUT/qwen3_moe.import.txt" ||
    fail "the Qwen3-MoE import's flags lack its dense layer 2"
  grep -q -- "--tensor-model-parallel-size 2 --sequence-parallel" "$OUT/qwen3_moe.import.txt" ||
    fail "the Qwen3-MoE import's command line lacks --sequence-parallel (Megatron's rule for experts under TP)"

  hf_checks
}

case_import_expert_parallel() {
  OUT=$(shared imports) || exit 1
  rm -rf "$OUT/qwen3_moe_ep.imported"
  step "the Qwen3-MoE imported for PP2 x EP2: Megatron's expert folders, transformers' logits"
  assert_succeeds "$CONVERT" --model-type GPT --loader hf --saver megatron --load-dir "$OUT/qwen3_moe.orig" \
    --save-dir "$OUT/qwen3_moe_ep.imported" --target-pipeline-parallel-size 2 --target-expert-parallel-size 2 \
    --vocab-file "$VOCAB" --merge-file "$MERGES"
  cp "$WORK/out.txt" "$OUT/qwen3_moe_ep.import.txt"
  grep -q -- "--pipeline-model-parallel-size 2 --expert-model-parallel-size 2 --load" "$WORK/out.txt" ||
    fail "the printed command line lacks --expert-model-parallel-size 2"
  for folder in mp_rank_00_000_000 mp_rank_00_000_001 mp_rank_00_001_000 mp_rank_00_001_001; do
    [[ -d $OUT/qwen3_moe_ep.imported/iter_0000000/$folder ]] || fail "no $folder"
  done
  assert_succeeds "$LOGITS" "$OUT/qwen3_moe_ep.imported" "$OUT/qwen3_moe_ep.logits" "${IDS[@]}"
  hf_job logits "$OUT/qwen3_moe.orig" "$OUT/qwen3_moe_ep.logits" Qwen3MoeForCausalLM "${IDS[@]}"
  ok "mp_rank_00_PPP_EEE folders; transformers' check queued"
  assert_fails_with "--target-expert-parallel-size 2: this model has no experts" "$CONVERT" --model-type GPT \
    --loader hf --saver megatron --load-dir "$OUT/llama.orig" --save-dir "$OUT/unused.ckpt" \
    --target-expert-parallel-size 2 --vocab-file "$VOCAB" --merge-file "$MERGES"
  assert_fails_with "the experts 4 is not divisible by --target-expert-parallel-size 3" "$CONVERT" --model-type GPT \
    --loader hf --saver megatron --load-dir "$OUT/qwen3_moe.orig" --save-dir "$OUT/unused.ckpt" \
    --target-expert-parallel-size 3 --vocab-file "$VOCAB" --merge-file "$MERGES"

  step "megatron_train loads it at PP2 x DP2 x EP2 with the printed command line, as it is, and trains on"
  flags_line=$(sed -n 's/^train from it with: megatron_train \(.*\) --finetune.*/\1/p' "$OUT/qwen3_moe_ep.import.txt")
  flags=()
  eval "flags=($flags_line)"  # the printed words are quoted for a shell
  [[ ${#flags[@]} -gt 10 ]] || { cat "$OUT/qwen3_moe_ep.import.txt"; fail "no megatron_train flags printed"; }
  assert_succeeds mpi 4 "${flags[@]}" --finetune --micro-batch-size 1 --global-batch-size 2 --lr 1e-4 --train-iters 3 \
    --data-path "$GOLDEN" --data-cache-path "$WORK/cache" "${TOKENIZER[@]}" --log-interval 1 --eval-iters 0
  grep -q "successfully loaded checkpoint from $OUT/qwen3_moe_ep.imported" "$WORK/out.txt" || fail "no load line"
  grep -q "resharding" "$WORK/out.txt" && fail "the imported checkpoint was resharded: its layout is not PP2 x EP2"
  grep -q "iteration        3/       3" "$WORK/out.txt" || fail "training did not go on"
  grep -q "load_balancing_loss" "$WORK/out.txt" || fail "no load-balancing loss in the iteration lines"
  ok "loaded as saved and trained 3 iterations"

  hf_checks
}

case_export_imports() {
  OUT=$(shared imports) || exit 1
  rm -rf "$OUT"/*.back
  step "exporting each import gives back the original tensors"
  for fam in llama mixtral qwen3 qwen3_moe; do
    assert_succeeds "$CONVERT" --model-type GPT --loader megatron --saver hf --load-dir "$OUT/$fam.imported" \
      --save-dir "$OUT/$fam.back"
    hf_job tensors_equal "$OUT/$fam.orig" "$OUT/$fam.back"
  done
  ok "exported"

  hf_checks
}

case_vocab_rows() {
  OUT=$SHARED/vocab_rows
  rm -rf "$OUT"
  mkdir -p "$OUT"
  step "a model with more vocabulary rows than its tokenizer's tokens (Qwen-style 50304 for 50257): an export gives them back"
  assert_succeeds "$PY" "$(dirname "$0")/hf_random_model.py" --vocab 50304 qwen3 "$OUT/qwen3.orig"
  assert_succeeds "$CONVERT" --model-type GPT --loader hf --saver megatron --load-dir "$OUT/qwen3.orig" \
    --save-dir "$OUT/qwen3.imported" --vocab-file "$VOCAB" --merge-file "$MERGES"
  cp "$WORK/out.txt" "$OUT/import.txt"
  assert_succeeds "$CONVERT" --model-type GPT --loader megatron --saver hf --load-dir "$OUT/qwen3.imported" \
    --save-dir "$OUT/qwen3.back"
  grep -q '"vocab_size": 50304' "$OUT/qwen3.back/config.json" || fail "the export cut the model's own vocabulary rows"
  hf_job tensors_equal "$OUT/qwen3.orig" "$OUT/qwen3.back"
  ok "exported with its 50304 rows (transformers' check queued)"

  step "trained on from the import with the printed command line, its checkpoints keep the rows"
  flags_line=$(sed -n 's/^train from it with: megatron_train \(.*\) --finetune.*/\1/p' "$OUT/import.txt")
  flags=()
  eval "flags=($flags_line)"  # the printed words are quoted for a shell
  [[ ${#flags[@]} -gt 10 ]] || { cat "$OUT/import.txt"; fail "no megatron_train flags printed"; }
  assert_succeeds "$TRAIN" "${flags[@]}" --finetune --micro-batch-size 1 --global-batch-size 1 --lr 1e-4 \
    --train-iters 2 --data-path "$GOLDEN" --data-cache-path "$WORK/cache" "${TOKENIZER[@]}" --log-interval 1 \
    --eval-iters 0 --save "$OUT/qwen3.trained" --save-interval 2
  assert_succeeds "$CONVERT" --model-type GPT --loader megatron --saver hf --load-dir "$OUT/qwen3.trained" \
    --save-dir "$OUT/qwen3.trained.hf"
  grep -q '"vocab_size": 50304' "$OUT/qwen3.trained.hf/config.json" || fail "a trained run's export cut the rows"
  ok "trained 2 iterations; exported with its 50304 rows"

  hf_checks
}

run_case "$1"
