#!/usr/bin/env bash
# Megatron-Core's own torch_dist checkpoints (written by megatron-core's code: the
# megatron_reference fixture) used as a Megatron user would: megatron_train resumes one in another
# layout at its iteration, consumed samples and learning-rate schedule; convert_checkpoint turns
# one into a HuggingFace folder whose per-token losses, computed by transformers, are the losses
# Megatron's own forward gave; what is not read yet (the optimizer state) is refused by name.
set -uo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
need_tools TRAIN CONVERT
[[ -r $MEGATRON_REFERENCE/megatron_reference.json ]] || fail "no $MEGATRON_REFERENCE: run through ctest (fixture megatron_reference)"

LLAMA=$MEGATRON_REFERENCE/llama_tp2_pp2_fp32
RUN=("$TRAIN" --mock-data --tokenizer-type NullTokenizer --vocab-size 128 --make-vocab-size-divisible-by 16
     --num-layers 4 --hidden-size 64 --num-attention-heads 4 --group-query-attention --num-query-groups 2
     --ffn-hidden-size 96 --swiglu --normalization RMSNorm --disable-bias-linear --position-embedding-type rope
     --untie-embeddings-and-output-weights --seq-length 16 --max-position-embeddings 32 --micro-batch-size 2
     --global-batch-size 8 --lr 3e-4 --train-iters 12 --log-interval 1 --eval-iters 0)

step "a resume reads the model; Megatron's optimizer state is not read yet, and says so"
assert_fails_with "is Megatron-Core's torch_dist checkpoint: its model, counters and scheduler are read here, its optimizer state not yet; give --no-load-optim" \
  "${RUN[@]}" --load "$LLAMA"

step "the TP2 x PP2 checkpoint resumed in one process at iteration 11, 88 samples, on Megatron's schedule"
assert_succeeds "${RUN[@]}" --load "$LLAMA" --no-load-optim --use-checkpoint-opt-param-scheduler
assert_contains "$WORK/out.txt" "reading Megatron-Core's distributed checkpoint $LLAMA/iter_0000010 (saved at tensor-model-parallel size 2 x pipeline-model-parallel size 2) into 1 x 1"
# The saved schedule: cosine from 3e-4 to 3e-5, 2 warmup and 800 decay samples; at 88 samples
# 3e-5 + 2.7e-4 * (1 + cos(pi * 86 / 798)) / 2.
assert_eq "11 2.923362E-04" "$(iteration_values "$WORK/out.txt" "learning rate" | head -1)" "iteration 11's learning rate"
grep -Eq "iteration +11/ +12 \| consumed samples: +88 \|" "$WORK/out.txt" || fail "iteration 11 has not consumed 88 samples"
ok "iteration 11 after 88 samples"

step "convert_checkpoint: torch_dist to HuggingFace; transformers gives Megatron's per-token losses"
for name in llama_tp2_pp2_fp32 llama_tp2_pp1_bf16 gpt2_tp2_pp1_fp32 gpt2_tp1_pp2_fp32; do
  assert_succeeds "$CONVERT" --model-type GPT --loader megatron --saver hf --load-dir "$MEGATRON_REFERENCE/$name" \
    --save-dir "$WORK/hf_$name"
done
"$PYTHON" - "$MEGATRON_REFERENCE/megatron_reference.json" "$WORK" <<'PY' || fail "transformers' losses differ from Megatron's"
import json, sys, torch, transformers
reference, work = sys.argv[1], sys.argv[2]
failed = False
for case in json.load(open(reference))["cases"]:
    if case["case"] not in ("llama_tp2_pp2_fp32", "llama_tp2_pp1_bf16", "gpt2_tp2_pp1_fp32", "gpt2_tp1_pp2_fp32"):
        continue
    model = transformers.AutoModelForCausalLM.from_pretrained(f"{work}/hf_{case['case']}", dtype=torch.float32)
    with torch.no_grad():
        logits = model(torch.tensor(case["tokens"])).logits
    losses = torch.nn.functional.cross_entropy(logits.transpose(1, 2), torch.tensor(case["labels"]), reduction="none")
    diff = (losses - torch.tensor(case["losses"])).abs().max().item()
    print(f"   {case['case']}: transformers' losses within {diff:.2e} of Megatron's")
    failed |= not diff < 1e-4
sys.exit(1 if failed else 0)
PY
ok "transformers on the converted folders gives Megatron's losses"
